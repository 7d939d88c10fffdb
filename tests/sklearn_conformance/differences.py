"""The scikit-learn split tests samplegen fails on purpose, each with its
reason in one line (conftest.py marks them ``xfail(strict=True)``).

A key is a pytest item's name: a test function's name covers all its
parametrizations, ``name[ids]`` one of them.  A test that fails for a
reason not given here is a break of scikit-learn's contract, to be fixed in
samplegen, not listed.  Each reason starts with its kind:

* ``rows`` -- the same seed draws other rows than scikit-learn's (a
  samplegen draw is keyed by the row id, so it is the same on every runner,
  and the splitters give exactly the rows the jobs write), or lists a side's
  rows in the order the jobs write them rather than ascending;
* ``drawn by default`` -- samplegen's fold splitters draw their folds
  unless told ``shuffle=False``; scikit-learn's take consecutive rows;
* ``seed drawn once`` -- a splitter made without a seed draws one when it is
  made, so all its splits are the same (scikit-learn's change per call);
* ``repr`` -- samplegen's repr shows its own parameters and its seed;
* ``message`` -- the same refusal (a ValueError), in samplegen's words.
"""

#: the scikit-learn version this list was made against
MADE_WITH = "1.9.1"

_ROWS = "rows: samplegen's draws for the same seed are other rows than scikit-learn's"
_DEFAULT = ("drawn by default: samplegen's folds are drawn unless shuffle=False; "
            "scikit-learn's default folds are consecutive rows")
_SEED_ONCE = ("seed drawn once: without a seed samplegen draws one when the splitter is made, "
              "so its splits are constant")
_REPR = "repr: samplegen's repr shows its own parameters and the seed"
_MESSAGE = "message: refused with a ValueError in samplegen's words"

LISTED = {
    # rows
    "test_repeated_kfold_deterministic_split": _ROWS,
    "test_repeated_stratified_kfold_deterministic_split": _ROWS,
    "test_kfold_can_detect_dependent_samples_on_digits":
        f"{_ROWS} (seed 0's shuffled folds score 0.90, under the 0.92 asked; scikit-learn's "
        "own seed 7 scores 0.89)",
    "test_stratified_group_kfold_against_group_kfold[30-cls_distr2]":
        "rows: GroupKFold's drawn order of the groups here stratifies better than "
        "StratifiedGroupKFold (so does scikit-learn's GroupKFold(shuffle=True) for 6 of 40 seeds)",
    "test_predefinedsplit_with_kfold_split":
        "rows: samplegen lists a fold's rows in the order the jobs write them, "
        "PredefinedSplit (and scikit-learn's KFold) in ascending order",
    # drawn by default
    "test_kfold_no_shuffle": _DEFAULT,
    "test_stratified_kfold_no_shuffle": _DEFAULT,
    "test_check_cv": f"{_DEFAULT} (check_cv(3) is scikit-learn's unshuffled KFold)",
    # seed drawn once: KFold, RepeatedKFold, RepeatedStratifiedKFold, ShuffleSplit,
    # GroupShuffleSplit and StratifiedShuffleSplit made with random_state=None
    "test_yields_constant_splits[cv18-False]": _SEED_ONCE,
    "test_yields_constant_splits[cv19-False]": _SEED_ONCE,
    "test_yields_constant_splits[cv22-False]": _SEED_ONCE,
    "test_yields_constant_splits[cv24-False]": _SEED_ONCE,
    "test_yields_constant_splits[cv26-False]": _SEED_ONCE,
    "test_yields_constant_splits[cv28-False]": _SEED_ONCE,
    "test_yields_constant_splits[cv30-False]": _SEED_ONCE,
    # repr
    "test_cross_validator_with_default_params": _REPR,
    "test_repeated_cv_repr[RepeatedKFold]": _REPR,
    "test_repeated_cv_repr[RepeatedStratifiedKFold]": _REPR,
    # message
    "test_2d_y": f"{_MESSAGE} (StratifiedKFold refusing a multilabel y)",
    "test_kfold_valueerrors": f"{_MESSAGE} (StratifiedKFold(0); shuffle=None is a ValueError, "
                              "scikit-learn's a ValueError and TypeError at once)",
    "test_leave_one_p_group_out": f"{_MESSAGE} (get_n_splits without groups)",
    "test_leave_one_p_group_out_error_on_fewer_number_of_groups": _MESSAGE,
    "test_train_test_split_errors": _MESSAGE,
    "test_group_kfold[42-True-GroupKFold]": f"{_MESSAGE} (fewer groups than folds)",
    "test_group_kfold[42-False-GroupKFold]": f"{_MESSAGE} (fewer groups than folds)",
    "test_time_series_cv": _MESSAGE,
    "test_time_series_test_size": _MESSAGE,
    "test_time_series_gap": _MESSAGE,
    "test_shuffle_split_empty_trainset": _MESSAGE,
    "test_train_test_split_empty_trainset": _MESSAGE,
    "test_random_state_shuffle_false[KFold]": _MESSAGE,
    "test_random_state_shuffle_false[StratifiedKFold]": _MESSAGE,
    "test_random_state_shuffle_false[GroupKFold]": _MESSAGE,
}
