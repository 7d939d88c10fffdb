/* Philox4x64-10 at arbitrary counters: the optional compiled kernel of
 * samplegen.udfs.rng (PositionRNG.at and PositionRNG.block).
 *
 * The same function as numpy's Philox (Salmon et al., Random123), evaluated
 * on a whole array of counters in one call, without the per-counter state
 * changes a stream generator needs.  udfs/rng.py has a pure-numpy twin of
 * every function here and chooses at import; tests/test_rng.py checks that
 * both give the same words (and numpy's Philox's) on edge and random
 * counters.  No numpy headers: arrays arrive through the buffer protocol, so
 * the module builds with a C compiler and Python's headers alone.
 *
 *   lanes(k0, k1, c1, c2, c3, positions, out)
 *       out[4i .. 4i+3] = Philox(key (k0, k1), counter (positions[i], c1, c2, c3))
 *   lanes_range(k0, k1, c1, c2, c3, start, out)
 *       the same for the positions start, start + 1, ... (len(out) / 4 of them),
 *       carrying into c1, c2, c3 as a 256-bit counter does.
 *   open_unit, skip_sum: the arithmetic of tbs/randomness.py's geometric
 *       skips (below).
 *
 * Word 0 of a counter is its least significant; k0, k1, c1, c2, c3, start
 * are Python ints in [0, 2**64); positions is a C-contiguous buffer of
 * uint64 (format Q, q, L or l of 8 bytes); out a writable C-contiguous
 * buffer of uint64 of 4 words per position.  The GIL is released while the
 * words are computed.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define M0 0xD2E7470EE14C6C93ULL
#define M1 0xCA5A826395121157ULL
#define W0 0x9E3779B97F4A7C15ULL
#define W1 0xBB67AE8584CAA73BULL

static inline uint64_t mulhilo(uint64_t a, uint64_t b, uint64_t *hi)
{
#if defined(__SIZEOF_INT128__)
    __uint128_t p = (__uint128_t)a * b;
    *hi = (uint64_t)(p >> 64);
    return (uint64_t)p;
#else
    uint64_t a_lo = a & 0xFFFFFFFFULL, a_hi = a >> 32;
    uint64_t b_lo = b & 0xFFFFFFFFULL, b_hi = b >> 32;
    uint64_t ll = a_lo * b_lo, lh = a_lo * b_hi, hl = a_hi * b_lo, hh = a_hi * b_hi;
    uint64_t mid = (ll >> 32) + (lh & 0xFFFFFFFFULL) + (hl & 0xFFFFFFFFULL);
    *hi = hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
    return (mid << 32) | (ll & 0xFFFFFFFFULL);
#endif
}

/* Philox4x64-10 of counter c under key (k0, k1), into out[0..3]. */
static inline void philox(const uint64_t ks[20], uint64_t c0, uint64_t c1, uint64_t c2,
                          uint64_t c3, uint64_t *out)
{
    int r;
    for (r = 0; r < 10; r++) {
        uint64_t hi0, hi1;
        uint64_t lo0 = mulhilo(M0, c0, &hi0);
        uint64_t lo1 = mulhilo(M1, c2, &hi1);
        c0 = hi1 ^ c1 ^ ks[2 * r];
        c1 = lo1;
        c2 = hi0 ^ c3 ^ ks[2 * r + 1];
        c3 = lo0;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

static void schedule(uint64_t k0, uint64_t k1, uint64_t ks[20])
{
    int r;
    for (r = 0; r < 10; r++) {
        ks[2 * r] = k0;
        ks[2 * r + 1] = k1;
        k0 += W0;
        k1 += W1;
    }
}

static int word(PyObject *obj, uint64_t *value)
{
    unsigned long long v = PyLong_AsUnsignedLongLong(obj);
    if (v == (unsigned long long)-1 && PyErr_Occurred())
        return 0;
    *value = (uint64_t)v;
    return 1;
}

static int words(PyObject *const *args, int count, uint64_t *out)
{
    int i;
    for (i = 0; i < count; i++)
        if (!word(args[i], &out[i]))
            return 0;
    return 1;
}

static int is_word_format(const char *format)
{
    if (format == NULL)
        return 1;               /* unsigned bytes: accepted when itemsize is 8 (never here) */
    if (*format == '<' || *format == '=' || *format == '@')
        format++;
    return strlen(format) == 1 && strchr("QqLl", *format) != NULL;
}

static int get_words(PyObject *obj, Py_buffer *view, int writable, const char *name)
{
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0)
        return 0;
    if (view->itemsize != 8 || !is_word_format(view->format)) {
        PyErr_Format(PyExc_TypeError, "%s must hold 64-bit integers", name);
        PyBuffer_Release(view);
        return 0;
    }
    return 1;
}

static PyObject *lanes(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    uint64_t w[5], ks[20];
    Py_buffer pos, out;
    Py_ssize_t n, i;
    (void)self;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "lanes(k0, k1, c1, c2, c3, positions, out)");
        return NULL;
    }
    if (!words(args, 5, w))
        return NULL;
    if (!get_words(args[5], &pos, 0, "positions"))
        return NULL;
    if (!get_words(args[6], &out, 1, "out")) {
        PyBuffer_Release(&pos);
        return NULL;
    }
    n = pos.len / 8;
    if (out.len != 32 * n) {
        PyErr_SetString(PyExc_ValueError, "out must hold 4 words per position");
        PyBuffer_Release(&pos);
        PyBuffer_Release(&out);
        return NULL;
    }
    schedule(w[0], w[1], ks);
    {
        const uint64_t *p = (const uint64_t *)pos.buf;
        uint64_t *o = (uint64_t *)out.buf;
        Py_BEGIN_ALLOW_THREADS
        for (i = 0; i < n; i++)
            philox(ks, p[i], w[2], w[3], w[4], o + 4 * i);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&pos);
    PyBuffer_Release(&out);
    Py_RETURN_NONE;
}

static PyObject *lanes_range(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    uint64_t w[6], ks[20];
    Py_buffer out;
    Py_ssize_t n, i;
    (void)self;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "lanes_range(k0, k1, c1, c2, c3, start, out)");
        return NULL;
    }
    if (!words(args, 6, w))
        return NULL;
    if (!get_words(args[6], &out, 1, "out"))
        return NULL;
    if (out.len % 32) {
        PyErr_SetString(PyExc_ValueError, "out must hold 4 words per position");
        PyBuffer_Release(&out);
        return NULL;
    }
    n = out.len / 32;
    schedule(w[0], w[1], ks);
    {
        uint64_t *o = (uint64_t *)out.buf;
        uint64_t c0 = w[5], c1 = w[2], c2 = w[3], c3 = w[4];
        Py_BEGIN_ALLOW_THREADS
        for (i = 0; i < n; i++) {
            philox(ks, c0, c1, c2, c3, o + 4 * i);
            if (++c0 == 0 && ++c1 == 0 && ++c2 == 0)
                ++c3;
        }
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&out);
    Py_RETURN_NONE;
}

/* Geometric skips (tbs/randomness.py _skip_positions), the arithmetic around
 * numpy's log in two loops instead of eight array passes:
 *   open_unit(words, out): out[i] = ((words[i] >> 11) + 1) * 2**-53, in (0, 1]
 *   skip_sum(logs, factor, carry, out): out[i] = carry + sum over j <= i of
 *       (trunc(logs[j] * factor) + 1); returns out[-1] (carry when empty)
 * Each double operation is the single IEEE operation numpy does (a product,
 * a conversion), so the values are numpy's. */
static int get_doubles(PyObject *obj, Py_buffer *view, int writable, const char *name)
{
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    const char *f;
    if (PyObject_GetBuffer(obj, view, flags) < 0)
        return 0;
    f = view->format;
    if (f != NULL && (*f == '<' || *f == '=' || *f == '@'))
        f++;
    if (view->itemsize != 8 || f == NULL || strcmp(f, "d") != 0) {
        PyErr_Format(PyExc_TypeError, "%s must hold float64 values", name);
        PyBuffer_Release(view);
        return 0;
    }
    return 1;
}

static PyObject *open_unit(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer w, out;
    Py_ssize_t n, i;
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "open_unit(words, out)");
        return NULL;
    }
    if (!get_words(args[0], &w, 0, "words"))
        return NULL;
    if (!get_doubles(args[1], &out, 1, "out")) {
        PyBuffer_Release(&w);
        return NULL;
    }
    n = w.len / 8;
    if (out.len != w.len) {
        PyErr_SetString(PyExc_ValueError, "out must hold one value per word");
    } else {
        const uint64_t *src = (const uint64_t *)w.buf;
        double *dst = (double *)out.buf;
        Py_BEGIN_ALLOW_THREADS
        for (i = 0; i < n; i++)
            dst[i] = (double)((src[i] >> 11) + 1) * 0x1p-53;
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&w);
    PyBuffer_Release(&out);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *skip_sum(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer e, out;
    Py_ssize_t n, i;
    double factor;
    long long carry;
    int64_t total;
    (void)self;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "skip_sum(logs, factor, carry, out)");
        return NULL;
    }
    factor = PyFloat_AsDouble(args[1]);
    if (factor == -1.0 && PyErr_Occurred())
        return NULL;
    carry = PyLong_AsLongLong(args[2]);
    if (carry == -1 && PyErr_Occurred())
        return NULL;
    if (!get_doubles(args[0], &e, 0, "logs"))
        return NULL;
    if (!get_words(args[3], &out, 1, "out")) {
        PyBuffer_Release(&e);
        return NULL;
    }
    n = e.len / 8;
    total = (int64_t)carry;
    if (out.len != e.len) {
        PyErr_SetString(PyExc_ValueError, "out must hold one value per log");
    } else {
        const double *src = (const double *)e.buf;
        int64_t *dst = (int64_t *)out.buf;
        Py_BEGIN_ALLOW_THREADS
        for (i = 0; i < n; i++) {
            total += (int64_t)(src[i] * factor) + 1;   /* truncation, as numpy's cast */
            dst[i] = total;
        }
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&e);
    PyBuffer_Release(&out);
    if (PyErr_Occurred())
        return NULL;
    return PyLong_FromLongLong((long long)total);
}

static PyMethodDef methods[] = {
    {"open_unit", (PyCFunction)(void (*)(void))open_unit, METH_FASTCALL,
     "open_unit(words, out): out = ((words >> 11) + 1) * 2**-53."},
    {"skip_sum", (PyCFunction)(void (*)(void))skip_sum, METH_FASTCALL,
     "skip_sum(logs, factor, carry, out): out = carry + cumsum(trunc(logs * factor) + 1); "
     "returns the last value."},
    {"lanes", (PyCFunction)(void (*)(void))lanes, METH_FASTCALL,
     "lanes(k0, k1, c1, c2, c3, positions, out): Philox4x64-10 at counters "
     "(positions[i], c1, c2, c3) into out (4 words each)."},
    {"lanes_range", (PyCFunction)(void (*)(void))lanes_range, METH_FASTCALL,
     "lanes_range(k0, k1, c1, c2, c3, start, out): the same at start, start + 1, ..."},
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_philox",
    "Philox4x64-10 at arbitrary counters (samplegen's optional compiled kernel).",
    -1, methods, NULL, NULL, NULL, NULL
};

PyMODINIT_FUNC PyInit__philox(void)
{
    return PyModule_Create(&module);
}
