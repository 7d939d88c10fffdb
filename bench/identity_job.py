"""The engine's own data movement, for comparison with MRSample.

For every input block line the mapper emits ``--copies`` records keyed like
MRSample's (group = (copy, v_index), sort key = (0, h_index)) whose payload is
the block as read; the shuffle groups and sorts them; the reducer writes them
to one file per group through the same atomic writer.  No sampling decision,
no decoding, no re-blocking: what is left is reading, shuffling and writing
the same volume of records as a sampling run that outputs ``copies`` times
the input.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from samplegen.jobs import fs as fsmod  # noqa: E402
from samplegen.jobs.engines.mapreduce import BlockRecordJob  # noqa: E402
from samplegen.jobs.phases import group_key, parse_group_key, sort_key  # noqa: E402


class MRIdentity(BlockRecordJob):
    def configure_args(self):
        super().configure_args()
        self.add_passthru_arg("--copies", type=int, default=1)
        self.add_passthru_arg("--out", default=None)

    def mapper(self, _, line):
        h, v, payload = line.split(b"\t", 2)
        for copy in range(self.options.copies):
            yield group_key(copy, int(v)), sort_key(0, int(h)) + b"\t" + payload

    def reducer(self, key, values):
        copy, v = parse_group_key(key)
        fs = fsmod.get_fs(self.options.out)
        writer = fs.open_atomic(fsmod.join(self.options.out, f"copy-{copy}", "part-v%05d" % v),
                                direct=True)
        n = 0
        for value in values:
            sort, payload = value.split(b"\t", 1)
            writer.write(b"%d\t%d\t%s\n" % (int(sort.split(b".")[1], 16), v, payload))
            n += 1
        writer.close()
        yield b"S", b"%d" % n


def report_vs_identity(rows):
    """Print the Markdown table of sampling runs next to the identity job and
    the I/O floor (*rows*: the benchmarks' case dicts), and return fold mode's
    speed-up over naive k-fold at k = 10."""
    print("\n| case | samplegen s | identity job s | I/O floor s | vs identity | "
          "output / input |\n|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['case']} | {r['seconds']:.1f} | {r['identity_seconds']:.1f} | "
              f"{r['io_floor_seconds']:.1f} | {r['seconds'] / r['identity_seconds']:.2f}x | "
              f"{r['output_over_input']:.2f} |")
    e = {r["case"]: r for r in rows}
    speedup = e["k-fold, k=10, naive"]["seconds"] / e["k-fold, k=10, fold mode"]["seconds"]
    print(f"\nfold mode vs naive at k = 10: {speedup:.2f}x faster")
    return speedup


if __name__ == "__main__":
    MRIdentity.run()
