"""Runs of different code in different parallel layouts (issue #30 item 5): a Megatron-style training run at TP=2
(q/k/v merged in a column-parallel `linear_qkv`, gate/up in `linear_fc1`, row-parallel `linear_proj`/`linear_fc2`,
`[s, b, h]`) against an HF-style run at TP=1, step folders of rank folders. Each side's ranks are combined on their
own (pair/parallel.py `alone_decisions`), then aligned (pair/align.py) and compared (layouts_aligned.py).

The dumps are written here, statistics only: every shard's statistics are drawn, and the unsharded run's are their
exact concatenations, so the runs carry the same tensors where no bug is planted."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from msprobe_compare.load.rows import flatten
from msprobe_compare.pair import parallel as P
from pair.test_align import Dump

H, F, S, B, L, V = 32, 64, 8, 2, 2, 16


class Stats:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def t(self, shape: list[int], scale: float = 1.0) -> dict[str, Any]:
        n = math.prod(shape)
        s = float(self.rng.uniform(0.5, 2.0)) * scale
        return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": shape, "Max": 3 * s + float(self.rng.random()),
                "Min": -3 * s - float(self.rng.random()), "Mean": float(self.rng.normal(0, 0.05)),
                "Norm": s * math.sqrt(n), "requires_grad": True}  # fmt: skip


def cat(parts: list[dict[str, Any]], shape: list[int]) -> dict[str, Any]:
    n = [math.prod(p["shape"]) for p in parts]
    return {**parts[0], "shape": shape, "Max": max(p["Max"] for p in parts), "Min": min(p["Min"] for p in parts),
            "Mean": sum(p["Mean"] * k for p, k in zip(parts, n)) / sum(n),
            "Norm": math.sqrt(sum(p["Norm"] ** 2 for p in parts))}  # fmt: skip


def like(leaf: dict[str, Any], shape: list[int], k: float = 1.0) -> dict[str, Any]:
    """The same tensor in another layout (`[s, b, h]` for `[b, s, h]`), scaled by `k`."""
    return {**leaf, "shape": shape, "Max": leaf["Max"] * k, "Min": leaf["Min"] * k, "Mean": leaf["Mean"] * k,
            "Norm": leaf["Norm"] * k}  # fmt: skip


class Run(Dump):
    """One rank's dump.json data and construct.json (tests/pair/test_align.py's Dump), written to a rank folder."""

    def write(self, folder: Path) -> None:
        folder.mkdir(parents=True)
        doc = {"task": "statistics", "level": "mix", "framework": "pytorch", "dump_data_dir": None, "data": self.data}
        (folder / "dump.json").write_text(json.dumps(doc, indent=1))
        (folder / "construct.json").write_text(json.dumps(self.tree))
        (folder / "stack.json").write_text("{}")


def make(
    root: Path, bug: float = 1.0, seed: int = 11, tp: int = 2, pp: int = 1, with_ends: bool = False, dp: int = 1
) -> Path:
    """root/npu/step0/rank{0..tp*pp-1} (Megatron-style: tensor-parallel ranks `tp`, pipeline stages `pp`, a stage's
    layers on its ranks, numbered from 0 in each stage, rank = stage * tp + tensor rank) and
    root/bench/step0/rank0 (HF-style); `bug` scales the npu's layer 1 MLP output (from its linear_fc2 on).
    `with_ends`: an embedding before the layers and a final norm after them (the first and the last stage's).
    `dp`: data-parallel replicas of the npu run, each the same (Megatron's rank order tp-dp-pp)."""
    st, ends = Stats(seed), Stats(seed + 1000)  # the ends' own draws: the layers' numbers do not depend on `ends`
    hf, mg = Run(), [Run() for _ in range(tp * pp)]
    bsh, sbh = (lambda n: [B, S, n]), (lambda n: [S, B, n])
    x = st.t(bsh(H))
    if with_ends:  # the embedding, on the first stage's ranks (its weight split by vocabulary rows)
        ids = {**ends.t([B, S]), "dtype": "torch.int64", "requires_grad": False}
        we = [ends.t([V // tp, H], 0.1) for _ in range(tp)]
        hf.module("model.embed_tokens", "Embedding", [ids], [x], {"weight": cat(we, [V, H])}, None)
        for r, run in enumerate(mg[:tp]):
            run.module("embedding.word_embeddings", "VocabParallelEmbedding", [{**ids, "shape": [B, S]}],
                       [like(x, sbh(H))], {"weight": we[r]}, None)  # fmt: skip
    for i in range(L):
        # the shards of every split tensor, per rank; the whole tensors are their concatenations
        wq, wk, wv = ([st.t([n // tp, H], 0.1) for _ in range(tp)] for n in (H, H // 2, H // 2))
        wo = [st.t([H, H // tp], 0.1) for _ in range(tp)]
        wg, wu = ([st.t([F // tp, H], 0.1) for _ in range(tp)] for _ in range(2))
        wd = [st.t([H, F // tp], 0.1) for _ in range(tp)]
        q, k, v = ([st.t(bsh(n // tp)) for _ in range(tp)] for n in (H, H // 2, H // 2))
        ctx = [st.t(bsh(H // tp)) for _ in range(tp)]
        g, u, act = ([st.t(bsh(F // tp)) for _ in range(tp)] for _ in range(3))
        wn1, wn2 = st.t([H], 0.5), st.t([H], 0.5)
        n1, o, h1, n2, d, out = (st.t(bsh(H)) for _ in range(6))
        d_bug = like(d, sbh(H), bug if i == 1 else 1.0)
        out_bug = like(out, sbh(H), bug if i == 1 else 1.0)
        # HF, TP=1
        layer = f"Module.model.layers.{i}.LlamaDecoderLayer.forward.0"
        attn, mlp = (f"Module.model.layers.{i}.{p}.forward.0" for p in ("self_attn.LlamaAttention", "mlp.LlamaMLP"))
        hf.module(f"model.layers.{i}.input_layernorm", "LlamaRMSNorm", [x], [n1], {"weight": wn1}, layer)
        for name, w, a, n in (("q_proj", wq, q, H), ("k_proj", wk, k, H // 2), ("v_proj", wv, v, H // 2)):
            hf.module(f"model.layers.{i}.self_attn.{name}", "Linear", [n1], [cat(a, bsh(n))],
                      {"weight": cat(w, [n, H])}, attn)  # fmt: skip
        hf.module(f"model.layers.{i}.self_attn.o_proj", "Linear", [cat(ctx, bsh(H))], [o],
                  {"weight": cat(wo, [H, H])}, attn)  # fmt: skip
        hf.module(f"model.layers.{i}.self_attn", "LlamaAttention", [n1], [o], None, layer)
        hf.module(f"model.layers.{i}.post_attention_layernorm", "LlamaRMSNorm", [h1], [n2], {"weight": wn2}, layer)
        hf.module(f"model.layers.{i}.mlp.gate_proj", "Linear", [n2], [cat(g, bsh(F))], {"weight": cat(wg, [F, H])}, mlp)
        hf.module(f"model.layers.{i}.mlp.up_proj", "Linear", [n2], [cat(u, bsh(F))], {"weight": cat(wu, [F, H])}, mlp)
        hf.module(f"model.layers.{i}.mlp.down_proj", "Linear", [cat(act, bsh(F))], [d], {"weight": cat(wd, [H, F])},
                  mlp)  # fmt: skip
        hf.module(f"model.layers.{i}.mlp", "LlamaMLP", [n2], [d], None, layer)
        hf.module(f"model.layers.{i}", "LlamaDecoderLayer", [x], [out], None, None)
        # Megatron: replicated tensors on every tensor rank of the layer's stage, shards on their own
        stage = i * pp // L
        j = i - stage * (L // pp)  # a stage numbers its own layers from 0, as Megatron's module names do
        layer = f"Module.decoder.layers.{j}.TransformerLayer.forward.0"
        attn, mlp = (f"Module.decoder.layers.{j}.{p}.forward.0" for p in ("self_attention.SelfAttention", "mlp.MLP"))
        for r, run in enumerate(mg[stage * tp : (stage + 1) * tp]):
            run.module(f"decoder.layers.{j}.input_layernorm", "RMSNorm", [like(x, sbh(H))], [like(n1, sbh(H))],
                       {"weight": wn1}, layer)  # fmt: skip
            qkv = cat([like(q[r], sbh(H // tp)), like(k[r], sbh(H // 2 // tp)), like(v[r], sbh(H // 2 // tp))],
                      sbh(2 * H // tp))  # fmt: skip
            run.module(f"decoder.layers.{j}.self_attention.linear_qkv", "ColumnParallelLinear", [like(n1, sbh(H))],
                       [qkv, None], {"weight": cat([wq[r], wk[r], wv[r]], [2 * H // tp, H])}, attn)  # fmt: skip
            run.module(f"decoder.layers.{j}.self_attention.linear_proj", "RowParallelLinear",
                       [like(ctx[r], sbh(H // tp))], [like(o, sbh(H)), None], {"weight": wo[r]}, attn)  # fmt: skip
            run.module(f"decoder.layers.{j}.self_attention", "SelfAttention", [like(n1, sbh(H))],
                       [like(o, sbh(H)), None], None, layer)  # fmt: skip
            run.module(f"decoder.layers.{j}.pre_mlp_layernorm", "RMSNorm", [like(h1, sbh(H))], [like(n2, sbh(H))],
                       {"weight": wn2}, layer)  # fmt: skip
            fc1 = cat([like(g[r], sbh(F // tp)), like(u[r], sbh(F // tp))], sbh(2 * F // tp))
            run.module(f"decoder.layers.{j}.mlp.linear_fc1", "ColumnParallelLinear", [like(n2, sbh(H))], [fc1, None],
                       {"weight": cat([wg[r], wu[r]], [2 * F // tp, H])}, mlp)  # fmt: skip
            run.module(f"decoder.layers.{j}.mlp.linear_fc2", "RowParallelLinear", [like(act[r], sbh(F // tp))],
                       [d_bug, None], {"weight": wd[r]}, mlp)  # fmt: skip
            run.module(f"decoder.layers.{j}.mlp", "MLP", [like(n2, sbh(H))], [d_bug, None], None, layer)
            run.module(f"decoder.layers.{j}", "TransformerLayer", [like(x, sbh(H))], [out_bug, None], None, None)
        x = out
    if with_ends:  # the final norm, on the last stage's ranks
        wf, y = ends.t([H], 0.5), ends.t(bsh(H))
        hf.module("model.norm", "LlamaRMSNorm", [x], [y], {"weight": wf}, None)
        for run in mg[(pp - 1) * tp :]:
            run.module("decoder.final_layernorm", "RMSNorm", [like(x, sbh(H), bug)], [like(y, sbh(H), bug)],
                       {"weight": wf}, None)  # fmt: skip
    hf.write(root / "bench" / "step0" / "rank0")
    for stage in range(pp):
        for d in range(dp):
            for t in range(tp):
                mg[stage * tp + t].write(root / "npu" / "step0" / f"rank{t + tp * (d + dp * stage)}")
    (root / "compare.json").write_text(json.dumps({"npu_path": "npu/step0", "bench_path": "bench/step0"}))
    return root


def test_shards_of_one_side_combine_on_their_own(tmp_path: Path) -> None:
    make(tmp_path)
    tables = [flatten(tmp_path / "npu" / "step0" / f"rank{r}" / "dump.json",
                      json.loads((tmp_path / "npu" / "step0" / f"rank{r}" / "dump.json").read_text())["data"])
              for r in range(2)]  # fmt: skip
    shards = P.align(tables, ["rank0", "rank1"])
    combined = P.combine(shards, np.arange(len(shards)), P.alone_decisions(shards), is_npu=True)
    rule = dict(zip(combined.table.names, combined.rule))
    shape = dict(zip(combined.table.names, combined.table.shape))
    qkv = "Module.decoder.layers.0.self_attention.linear_qkv.ColumnParallelLinear.forward.0"
    proj = "Module.decoder.layers.0.self_attention.linear_proj.RowParallelLinear.forward.0"
    assert rule[f"{qkv}.output.0"] == P.SPLIT and shape[f"{qkv}.output.0"] == "[8, 2, 64]"
    assert rule[f"{qkv}.parameters.weight"] == P.SPLIT and shape[f"{qkv}.parameters.weight"] == "[64, 32]"
    assert rule[f"{proj}.parameters.weight"] == P.SPLIT and shape[f"{proj}.parameters.weight"] == "[32, 32]"
    assert rule[f"{qkv}.input.0"] == P.REPLICATED and rule[f"{proj}.output.0"] == P.REPLICATED


@pytest.mark.parametrize("bug", [1.0, 1.25])
def test_tp2_training_run_against_tp1_of_other_code_is_aligned(tmp_path: Path, run_cli, bug: float) -> None:
    case = make(tmp_path / "case", bug=bug)
    run = run_cli(case, "pytorch", "--format", "csv")
    assert run.code == 0, run.out
    assert "combined on their own (the module trees differ)" in run.out
    csv = next(run.out_dir.glob("compare_result_dp0_*.csv")).read_text()
    rows = {line.split(",")[0]: line for line in csv.splitlines()[1:]}
    merged = ";".join(f"Module.model.layers.0.self_attn.{p}_proj.Linear.forward.0.output.0" for p in "qkv")
    qkv = "Module.decoder.layers.0.self_attention.linear_qkv.ColumnParallelLinear.forward.0.output.0"
    assert any(name == qkv and merged in line for name, line in rows.items()) or any(
        merged in name and qkv in line for name, line in rows.items()
    ), "linear_qkv (TP=2) not paired with q;k;v"
    doc = next(run.out_dir.glob("module_alignment_dp0_*.yaml")).read_text()
    assert "decoder.layers.1.mlp.linear_fc1" in doc and "model.layers.1.mlp.gate_proj;model.layers.1.mlp.up_proj" in doc
    headline = next(line for line in run.out.splitlines() if "Root cause:" in line)
    if bug == 1.0:
        assert "Root cause: no origin" in headline, headline
    else:
        assert "layers.1.mlp" in headline, headline
    rank_cols = csv.splitlines()[0].split(",")
    assert any("rank" in c.lower() for c in rank_cols), rank_cols  # the ranks combined into each row are shown


@pytest.mark.parametrize("tp,pp,dp", [(4, 1, 1), (1, 2, 1), (2, 2, 1), (2, 1, 2)])
@pytest.mark.parametrize("bug", [1.0, 1.25])
def test_other_layouts_of_other_code(tmp_path: Path, run_cli, tp: int, pp: int, dp: int, bug: float) -> None:
    """TP=4, pipeline stages (each numbering its layers from 0; the first holds the embedding, the last the final
    norm), both, and data-parallel replicas: the layout is detected, each replica's ranks are combined on their own,
    aligned with the TP=1 run, and the planted bug is named at its module (nothing when there is none)."""
    case = make(tmp_path / "case", bug=bug, tp=tp, pp=pp, dp=dp, with_ends=True)
    run = run_cli(case, "pytorch", "--format", "csv")
    assert run.code == 0, run.out
    assert f"npu layout: tp={tp},pp={pp},dp={dp} (detected" in run.out, run.out
    if dp > 1:  # told from 4 TP ranks by the replicas' equal parameters (the rank counts alone cannot)
        assert f"{dp} data-parallel replicas: ranks whose parameters are the same" in run.out, run.out
    for d in range(dp):
        ranks = "+".join(f"rank{t + tp * (d + dp * s)}" for s in range(pp) for t in range(tp))
        assert f"[dp{d}] npu {ranks} combined on their own" in run.out, run.out
        paired = next(line for line in run.out.splitlines() if f"[dp{d}]" in line and "boundaries paired" in line)
        assert "20 module boundaries paired (4 merged N-to-1" in paired, paired
        headline = next(line for line in run.out.splitlines() if f"[dp{d}]" in line and "Root cause:" in line)
        if bug == 1.0:
            assert "Root cause: no origin" in headline, headline
        else:
            assert "Root cause: Module.decoder.layers.1.mlp.linear_fc2" in headline, headline
        csv = next(run.out_dir.glob(f"compare_result_dp{d}_*.csv")).read_text()
        assert "model.embed_tokens" in csv and "model.norm" in csv  # the ends are paired too


def test_tp1_run_against_a_tp2_run_of_other_code(tmp_path: Path, run_cli) -> None:
    """The other way round: the unsharded run as npu, the sharded one as bench (inference TP=1 against training)."""
    case = make(tmp_path / "case", bug=1.25)
    (case / "compare.json").write_text(json.dumps({"npu_path": "bench/step0", "bench_path": "npu/step0"}))
    run = run_cli(case, "pytorch", "--format", "csv")
    assert run.code == 0, run.out
    assert "bench rank0+rank1 combined on their own" in run.out
    headline = next(line for line in run.out.splitlines() if "Root cause:" in line)
    assert "model.layers.1.mlp" in headline, headline


# -- real dumps: tests/data/impl/impl_tp.tar.xz (make_impls.py build-tp): the reference dumper, Megatron-style at
# TP=2 (gloo processes, column/row-parallel linears with their all-reduces) against HF or vLLM at TP=1
TP_ARCHIVE = Path(__file__).resolve().parent / "data" / "impl" / "impl_tp.tar.xz"
PART = {"scale": ("mlp",), "gate": ("mlp",), "attn": ("attn", "attention"), "norm": ("norm",)}


@pytest.fixture(scope="module")
def tp_cases(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from conftest import extract_archive

    return extract_archive(TP_ARCHIVE, tmp_path_factory.mktemp("impl_tp"))


def _tp_case_names() -> list[str]:
    import tarfile

    with tarfile.open(TP_ARCHIVE) as tar:
        return sorted({part for m in tar.getmembers() for part in Path(m.name).parts[:1] if part.startswith("tp_")})


@pytest.mark.parametrize("name", _tp_case_names())
def test_real_tp2_runs_against_tp1_runs_of_other_code(tp_cases: Path, name: str, run_cli) -> None:
    case = tp_cases / name
    spec = json.loads((case / "CASE.json").read_text())
    run = run_cli(case, "pytorch", "--format", "csv")
    assert run.code == 0, run.out
    side = "npu" if spec["npu_tp"] > 1 else "bench"
    assert f"{side} rank0+rank1 combined on their own" in run.out
    paired = next(line for line in run.out.splitlines() if "module boundaries paired" in line)
    assert " 31 module boundaries paired (6 merged" in paired or spec["npu"] == "vllm" or spec["bench"] == "vllm", (
        paired
    )
    headline = next(line for line in run.out.splitlines() if "Root cause:" in line)
    if spec["bug"] == "none":
        assert "Root cause: no origin" in headline, headline
    else:
        origin = headline.split("Root cause:", 1)[1].split(":")[0]
        assert f"layers.{spec['layer']}." in origin and any(p in origin for p in PART[spec["bug"]]), headline


def test_the_report_of_a_replica_says_what_was_compared(tmp_path: Path, run_cli) -> None:
    case = make(tmp_path / "case")
    run = run_cli(case, "pytorch", "--format", "html")
    assert run.code == 0, run.out
    page = next(run.out_dir.glob("compare_report_dp0_*.html")).read_text()
    title = page.split("<title>", 1)[1].split("</title>", 1)[0]
    assert title.startswith("msprobe-compare: ") and "npu/step0/rank0 vs " in title and "bench/step0/rank0" in title
