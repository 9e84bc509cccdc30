"""Every user-visible text of the result table and advisor, produced from codes in one place."""

from __future__ import annotations

from collections.abc import Iterable

from msprobe_compare.judge.accuracy import Accuracy
from msprobe_compare.judge.advisor import Advice
from msprobe_compare.judge.highlight import Reason
from msprobe_compare.judge.verdict import Msg, Result
from msprobe_compare.measure.tensor_metrics import MetricState, TensorMsg

RESULT_TEXT = {
    Result.EMPTY: "",
    Result.WARNING: "Warning",
    Result.NA: "N/A",
    Result.PASS: "pass",
    Result.DIFFERENT: "Different",
}

ACCURACY_TEXT = {Accuracy.YES: "Yes", Accuracy.NO: "No", Accuracy.UNMATCHED: "Unmatched", Accuracy.NONE: "None"}

MSG_TEXT = {
    Msg.NO_BENCH: "No bench data matched.",
    Msg.DOUBLE_CHECK: "Need double check api accuracy. ",
    Msg.REQUIRES_GRAD: "Requires_grad inconsistent. ",
}

FUZZY_TEXT = " Fuzzy matching data, the comparison accuracy may be affected."

REASON_TEXT = {
    Reason.RED_NAN_INF: "maximum or minimum is nan, -inf, or inf",
    Reason.RED_MAX_ABS: "maximum absolute error exceeds 1e+10",
    Reason.RED_ONE_K: "The input/parameter's one thousandth err ratio exceeds 0.9, while the output's is below 0.6",
    Reason.RED_MAX_REL: "maximum relative error exceeds 0.5",
    Reason.YELLOW_REQUIRES_GRAD: "requires_grad is inconsistent",
    Reason.YELLOW_MAGNITUDE: (
        "maximum absolute error of both input/parameters and output exceed 1, "
        "with the output larger by an order of magnitude"
    ),
    Reason.YELLOW_ONE_K: (
        "The output's one thousandth err ratio decreases by more than 0.1 compared to the input/parameter's"
    ),
    Reason.YELLOW_COSINE: "The output's cosine decreases by more than 0.1 compared to the input/parameter's",
    Reason.YELLOW_MAX_REL: (
        "The output's maximum relative error exceeds 0.1, while the input/parameter's is below 0.01"
    ),
}

ADVICE_TEXT = {
    Advice.ALL_PASS: "All data in comparison result meets the accuracy requirements.",
    Advice.FORWARD_INPUT: (
        "1. Analyze the model to view the input source.\n"
        "2. Check whether an inplace API causes the output result to overwrite the input result. "
        "That is, the fault is actually caused by a computation error.\n"
        "3. The fault may be caused by memory corruption and further analysis is required."
    ),
    Advice.FORWARD_OUTPUT: "This is a forward API computation error. Check the computation implementation.",
    Advice.BACKWARD_INPUT: "Check whether the forward computation result is affected.",
    Advice.BACKWARD_OUTPUT: "This is a backward API computation error. Check the computation implementation.",
    Advice.DETERMINISTIC: (
        "This torch api may be uncertainty in the calculation, "
        "can seed_all(mode=True) to enable deterministic computing."
    ),
    Advice.BATCH_NORM: (
        "Torch API batch_norm input not fixed, the following suggestions may fix it:\n"
        "1. If use torch.nn.functional.batch_norm, you can set parameter training=False.\n"
        "2. If use torch.nn.BatchNormXXX, you can set parameter affine=False.\n"
        "3. Use seed_all(mode=True) to enable deterministic computing."
    ),
}


def base_message(flags: int) -> str:
    return "".join(text for flag, text in MSG_TEXT.items() if flags & flag)


def reason_lines(flags: int) -> list[str]:
    return [text for flag, text in REASON_TEXT.items() if flags & flag]


def join_message(base: str, reasons: list[str]) -> str:
    """Highlight reasons replace an empty message or follow it, each after a newline."""
    parts = [base] if base else []
    parts.extend(reasons)
    return "\n".join(parts)


STATE_TEXT: dict[MetricState, str] = {
    MetricState.NAN: "Nan",
    MetricState.UNSUPPORTED: "unsupported",
    MetricState.SHAPE_UNMATCHED: "shape unmatched",
    MetricState.NOT_AVAILABLE: "N/A",
}


TENSOR_MSG_TEXT: dict[TensorMsg, str] = {
    TensorMsg.NPU_NO_DATA_FILE: "NPU does not have data file.",
    TensorMsg.BENCH_NO_DATA_FILE: "Bench does not have data file.",
    TensorMsg.BENCH_UNMATCHED: "Bench api/module unmatched.",
    TensorMsg.READ_FAILED: "Dump file: {} not found or read failed.",
    TensorMsg.EMPTY: "This is empty data, can not compare.",
    TensorMsg.ZERO_DIM: (
        "This is type of 0-d tensor, can not calculate 'Cosine', 'EucDist', 'One Thousandth Err Ratio' and "
        "'Five Thousandths Err Ratio'. "
    ),
    TensorMsg.SHAPE_MISMATCH: "Shape of NPU and bench tensor do not match. Skipped.",
    TensorMsg.NAN_INF_MISMATCH: "The position of inf or nan in NPU and bench Tensor do not match.",
    TensorMsg.UNREADABLE: "Data is unreadable.",
    TensorMsg.DTYPE_MISMATCH: "Dtype of NPU and bench tensor do not match.",
    TensorMsg.ONE_ELEMENT: "This is a 1-d tensor of length 1.",
    TensorMsg.COSINE_NPU_ZERO: "Cannot compare by Cosine Similarity, All the data is Zero in npu dump data.",
    TensorMsg.COSINE_BENCH_ZERO: "Cannot compare by Cosine Similarity, All the data is Zero in Bench dump data.",
    TensorMsg.COSINE_NAN: "Cannot compare by Cosine Similarity, the dump data has NaN.",
    TensorMsg.MAX_ABS_NAN: "Cannot compare by MaxAbsError, the data contains nan/inf/-inf in dump data.",
    TensorMsg.MAX_REL_NAN: "Cannot compare by MaxRelativeError, the data contains nan/inf/-inf in dump data.",
}


def messages_text(messages: Iterable[TensorMsg], read_failed_files: str = "") -> str:
    """The real-data Err_message text of `messages`: the reference sentences concatenated without separators."""
    return "".join(
        TENSOR_MSG_TEXT[m].format(read_failed_files) if m is TensorMsg.READ_FAILED else TENSOR_MSG_TEXT[m]
        for m in messages
    )
