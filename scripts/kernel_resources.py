#!/usr/bin/env python3
"""Static resource usage of every CUDA kernel, and its theoretical occupancy on an H100.

Compiles each .cu file of the project (tests excluded) for sm_90 (ARCH_OF: the files built for sm_90a) with
ptxas' report (-Xptxas -v), in parallel and device code only, and prints a markdown table with one row per kernel: threads per block,
registers per thread, spill stores and loads, stack frame, static shared memory, and the theoretical
occupancy on an H100 (resident blocks per SM, the fraction of the SM's 64 warps, and what limits it).

Occupancy follows NVIDIA's occupancy calculator for compute capability 9.0:
  - 65536 registers per SM, allocated per warp in units of 256 (a warp of R-register threads takes
    ceil(32 R / 256) * 256 registers);
  - at most 2048 threads (64 warps) and 32 blocks per SM;
  - 228 KiB of shared memory per SM, at most 227 KiB per block, plus 1 KiB per block that the CUDA
    runtime reserves for itself.
The threads per block come from the table BLOCK_THREADS below (each launcher's configuration, read from
its LAB_LAUNCH call); a kernel missing from the table is an error, so a new kernel cannot slip through.

The last column counts each kernel's tensor-core instructions: mma in its PTX, and HMMA/HGMMA in its SASS where
cuobjdump is installed. The kernels of TENSOR_CORE_KERNELS (flash attention's tile kernels, the WMMA matmul)
must have them.

Exit status: 0; 1 when a kernel spills registers (spill stores or loads > 0) and is not listed, with a
reason, in scripts/kernel_resources_allowlist.txt, or when a kernel of TENSOR_CORE_KERNELS has no tensor-core
instruction; 2 when a file does not compile, nvcc is missing, a kernel has no block size, or TENSOR_CORE_KERNELS
names a kernel that no file defines.

    python3 scripts/kernel_resources.py                      # table on stdout
    python3 scripts/kernel_resources.py --out kernels.md     # and into a file
"""

import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ALLOWLIST = ROOT / "scripts" / "kernel_resources_allowlist.txt"
ARCH = "sm_90"
# Files compiled for another architecture, as their CMake target compiles them: wgmma exists on sm_90a only.
ARCH_OF = {"ch09_advanced/kernels/01_attention/flash_wgmma.cu": ("sm_90a", ["-DLAB_FLASH_WGMMA_SM90A"])}

# H100 (compute capability 9.0) limits per SM, from NVIDIA's occupancy calculator.
REGISTERS_PER_SM = 65536
REGISTER_UNIT = 256  # registers are allocated per warp in multiples of this
MAX_WARPS_PER_SM = 64  # 2048 threads
MAX_BLOCKS_PER_SM = 32
SHARED_PER_SM = 228 * 1024
SHARED_PER_BLOCK_MAX = 227 * 1024
SHARED_RESERVED_PER_BLOCK = 1024  # taken by the CUDA runtime in every block
SHARED_UNIT = 128  # allocation granularity of shared memory

# Threads per block of each kernel, as its launcher configures it (kBlockSize = 256 in
# common/ops/cuda/launch.cuh; the column sums use 32 x kColumnRows = 512; the classifier kThreads = 512).
BLOCK_THREADS = {
    "adamw_kernel": 256,
    "add_bias_gradient_kernel": 256,
    "causal_softmax_kernel": 256,
    "causal_softmax_backward_kernel": 256,
    "fused_classifier_kernel": 512,
    "embedding_forward_kernel": 256,
    "embedding_backward_kernel": 256,
    "gelu_forward_kernel": 256,
    "gelu_backward_kernel": 256,
    "gelu_forward_pieces_kernel": 256,
    "gelu_backward_pieces_kernel": 256,
    "layernorm_forward_kernel": 256,
    "layernorm_forward_pieces_kernel": 256,
    "layernorm_backward_dx_kernel": 256,
    "layernorm_backward_pieces_kernel": 128,
    "column_partial_sums_kernel": 512,
    "column_piece_partial_sums_kernel": 512,
    "column_totals_kernel": 512,
    "partial_sums_kernel": 256,
    "accumulate_sum_kernel": 1,  # one thread adds the partial sums in block order (reduce.cu)
    "norm_and_scale_kernel": 1,
    "update_loss_scale_kernel": 1,  # one thread moves the loss scale after the norm (loss_scale.cu)
    "residual_forward_kernel": 256,
    "residual_backward_kernel": 256,
    "residual_forward_pieces_kernel": 256,
    "residual_backward_pieces_kernel": 256,
    "gradient_copy_pieces_kernel": 256,
    "gradient_copy_kernel": 256,
    "widen_tokens_kernel": 256,
    "convert_kernel": 256,  # fp32 <-> bf16/fp16 (mixed precision)
    # ch06 lab 04 (classifier): a row per block of kRowThreads / kThreads = 512 (v4's fused_float4_kernel<kVec>
    # too), 1024 for v5's fused_classifier_pieces_kernel<D> (32 for the fused_classifier_warp_kernel<D>);
    # elementwise kernels kBlockSize.
    "fused_float4_kernel": 512,
    "fused_classifier_pieces_kernel": 1024,
    "fused_classifier_warp_kernel": 32,
    # v6, fused_classifier_shared_row_kernel<D>: 512 threads and the row in dynamic shared memory (up to 112 KiB,
    # which this table's static column does not show: two blocks an SM at GPT-2's 100.6 KB bf16 row).
    "fused_classifier_shared_row_kernel": 512,
    "softmax_three_pass_kernel": 512,
    "softmax_online_kernel": 512,
    "cross_entropy_kernel": 256,
    "cross_entropy_backward_kernel": 256,
    # ch06 lab 05 (AdamW): multi-tensor apply's kThreads = 512, the flat-buffer kernels kBlockSize.
    "multi_tensor_adamw_kernel": 512,
    "flat_adamw_kernel": 256,
    "flat_adamw_bf16_kernel": 256,
    # ch06 lab 01 (matmul): 32 x 8 threads (naive), 32 x 32 (shared-memory tiles), 256 for the 128 x 128 block
    # tiles (register blocked, vectorised), 4 warps (WMMA).
    "matmul_naive_kernel": 256,
    "matmul_smem_tiled_kernel": 1024,
    "matmul_register_blocked_kernel": 256,
    "matmul_vectorized_kernel": 256,
    "matmul_wmma_bf16_kernel": 128,
    # ch06 lab 02 (layernorm): kBlockSize everywhere (the backward kernels' kGradWarps = 8 warps); the second
    # kernel of the fused column sums (ch06_single_gpu/chunk_totals.cuh) is 32 x kTotalRows = 512.
    "layernorm_forward_v1_kernel": 256,
    "layernorm_backward_dx_v1_kernel": 256,
    "layernorm_weight_grads_v1_kernel": 256,
    "layernorm_forward_v3_kernel": 256,
    "layernorm_backward_v3_kernel": 256,
    "fused_residual_layernorm_forward_kernel": 256,
    "fused_residual_layernorm_backward_kernel": 256,
    "chunk_totals_kernel": 512,
    # ch06 lab 03 (bias + GELU): kBlockSize.
    "add_bias_v1_kernel": 256,
    "gelu_backward_v1_kernel": 256,
    "bias_gelu_forward_v2_kernel": 256,
    "bias_gelu_backward_v2_kernel": 256,
    # ch08 tensor parallelism (tp/cuda/vocab_parallel_ops.cu): the vocabulary-parallel cross-entropy's row
    # kernels kRowThreads = 512 (a row per block), the bias kernel kBlockSize.
    "max_and_target_kernel": 512,
    "sum_exp_kernel": 512,
    "loss_and_grad_kernel": 512,
    "add_bias_kernel": 256,
    # Flash attention (common/ops/cuda/flash_attention.cu): the tile kernels kThreads = 4 warps, with 45-102.5 KiB of
    # dynamic shared memory this table's static column does not show; the row kernels kBlockSize.
    "flash_forward_kernel": 128,
    "flash_key_grads_kernel": 128,
    "flash_query_grads_kernel": 128,
    "flash_row_dot_kernel": 256,
    "flash_row_dot_pieces_kernel": 256,
    "lse_from_probabilities_kernel": 256,
    # Batched attention (common/ops/cuda/batched_attention.cu): attention.cu's softmax row kernels with 16-bit
    # probabilities, kBlockSize (a warp per row).
    "batched_causal_softmax_kernel": 256,
    "batched_causal_softmax_backward_kernel": 256,
    # ch09 lab 01 (attention): v4's WMMA kernels (70-187 KiB of dynamic shared memory) and v5's one-pass
    # backward (up to 219.5 KiB), kThreads = 4 warps, and the elementwise kernel that adds v5's f32 dQ into dqkv,
    # kBlockSize.
    "flash_wmma_forward_kernel": 128,
    "flash_wmma_key_grads_kernel": 128,
    "flash_wmma_query_grads_kernel": 128,
    "flash_key_grads_atomic_kernel": 128,
    "flash_add_dq_kernel": 256,
    # ch09 lab 01, v6: the core's tile kernels before their loads overlapped (27-68.5 KiB), kThreads = 4 warps.
    "flash_registers_forward_kernel": 128,
    "flash_wgmma_forward_kernel": 128,
    "flash_wgmma_overlapped_forward_kernel": 128,
    "flash_registers_key_grads_kernel": 128,
    "flash_registers_query_grads_kernel": 128,
    # Flash attention's one-pass backward (common/ops/cuda/flash_attention_one_pass.cu, ch09 lab 01's v9) on the
    # core's register kernels (61-113 KiB), kThreads = 4 warps, and the elementwise kernel that writes or adds its
    # f32 dQ into dqkv, kBlockSize.
    "flash_one_pass_grads_kernel": 128,
    "flash_dq_into_dqkv_kernel": 256,
    "flash_dq_pieces_into_dqkv_kernel": 256,
}


@dataclass
class Kernel:
    mangled: str
    source: str
    registers: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    stack_bytes: int = 0
    shared_bytes: int = 0
    name: str = ""
    ptx_mma: int = 0
    sass_mma: int = -1  # -1: no cuobjdump to read the SASS


def cu_sources():
    """Every .cu file of the project outside tests/ and build folders, sorted: the tracked ones and the new ones git
    would track (not ignored), so that a kernel is reported before its first commit."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.cu"], cwd=ROOT,
                            capture_output=True, text=True)
    if listed.returncode == 0 and listed.stdout.strip():
        files = [ROOT / line for line in listed.stdout.split()]
    else:  # not a git checkout: walk the tree
        files = [p for p in ROOT.rglob("*.cu") if not any(part.startswith("build") for part in p.parts)]
    return sorted(f for f in files if f.exists() and "tests" not in f.relative_to(ROOT).parts)


def compile_one(nvcc, source, scratch):
    """Compiles one file's device code, keeping its PTX; returns (source, ptxas report, error text or None,
    the PTX text, the cubin's path)."""
    keep = Path(scratch) / str(source.relative_to(ROOT)).replace("/", "_")
    keep.mkdir()
    out = keep / (source.stem + ".cubin")
    arch, defines = ARCH_OF.get(str(source.relative_to(ROOT)), (ARCH, []))
    command = [nvcc, "-std=c++20", f"-arch={arch}", "-O3", "--expt-relaxed-constexpr", f"-I{ROOT}",
               "-DLAB_WITH_CUDA", *defines, "-Xptxas", "-v", "-cubin", "-keep", "-keep-dir", str(keep), "-o", str(out),
               str(source)]
    done = subprocess.run(command, capture_output=True, text=True)
    report = done.stdout + done.stderr
    ptx = keep / (source.stem + ".ptx")
    return (source, report, (None if done.returncode == 0 else report), ptx.read_text() if ptx.exists() else "",
            out)


# The kernels whose every instantiation must run its products on tensor cores: the PTX holds mma instructions
# (wmma.mma.sync, mma.sync, wgmma) and, where cuobjdump is installed, the SASS holds HMMA (or HGMMA). A kernel
# whose products fell back to scalar FMAs (a 16-bit type lost in a template, a WMMA wrapper compiled out) fails the
# check; a name listed here that no longer exists fails it too, so the check cannot go stale.
TENSOR_CORE_KERNELS = {
    "flash_forward_kernel",
    "flash_key_grads_kernel",
    "flash_query_grads_kernel",
    "flash_wmma_forward_kernel",
    "flash_wmma_key_grads_kernel",
    "flash_wmma_query_grads_kernel",
    "flash_key_grads_atomic_kernel",
    "flash_registers_forward_kernel",
    "flash_registers_key_grads_kernel",
    "flash_registers_query_grads_kernel",
    "flash_one_pass_grads_kernel",
    "flash_wgmma_forward_kernel",
    "flash_wgmma_overlapped_forward_kernel",
    "matmul_wmma_bf16_kernel",
}
PTX_MMA = re.compile(r"\b(?:wmma\.mma\.sync|mma\.sync|wgmma\.mma_async)\b")
SASS_MMA = re.compile(r"\b(?:HMMA|HGMMA)\b")


def ptx_mma_counts(ptx):
    """mangled entry name -> tensor-core instructions in its PTX body."""
    counts = {}
    parts = re.split(r"\.entry\s+(\S+?)\s*\(", ptx)
    for name, body in zip(parts[1::2], parts[2::2]):
        counts[name] = len(PTX_MMA.findall(body))
    return counts


def sass_mma_counts(cuobjdump, cubin):
    """mangled function name -> HMMA/HGMMA instructions in its SASS, from `cuobjdump -sass`."""
    listing = subprocess.run([cuobjdump, "-sass", str(cubin)], capture_output=True, text=True).stdout
    counts = {}
    parts = re.split(r"Function : (\S+)", listing)
    for name, body in zip(parts[1::2], parts[2::2]):
        counts[name] = len(SASS_MMA.findall(body))
    return counts


ENTRY = re.compile(r"Compiling entry function '(\S+)' for '(\w+)'")
FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
USED = re.compile(r"Used (\d+) registers")
SMEM = re.compile(r"(\d+) bytes smem")


def parse_report(source, report):
    kernels, current = [], None
    for line in report.splitlines():
        if m := ENTRY.search(line):
            current = Kernel(mangled=m.group(1), source=str(source.relative_to(ROOT)))
            kernels.append(current)
        elif current and (m := FRAME.search(line)):
            current.stack_bytes, current.spill_stores, current.spill_loads = map(int, m.groups())
        elif current and (m := USED.search(line)):
            current.registers = int(m.group(1))
            if s := SMEM.search(line):
                current.shared_bytes = int(s.group(1))
    return kernels


def readable_names(mangled):
    """Demangled names without namespaces, return type or parameter list."""
    demangled = subprocess.run(["c++filt"], input="\n".join(mangled), capture_output=True, text=True).stdout
    names = []
    for full in demangled.splitlines():
        name = re.sub(r"^void ", "", full)
        if name.endswith(")"):  # drop the parameter list: the last balanced (...)
            depth = 0
            for i in range(len(name) - 1, -1, -1):
                depth += {")": 1, "(": -1}.get(name[i], 0)
                if depth == 0:
                    name = name[:i]
                    break
        names.append(re.sub(r"\(anonymous namespace\)::|\b[A-Za-z_]\w*::", "", name))
    return names


def occupancy(threads, registers, shared):
    """Resident blocks per SM, the fraction of the SM's warps they fill, and the limiting resource."""
    warps = -(-threads // 32)
    registers_per_warp = -(-registers * 32 // REGISTER_UNIT) * REGISTER_UNIT
    shared_per_block = -(-(shared + SHARED_RESERVED_PER_BLOCK) // SHARED_UNIT) * SHARED_UNIT
    limits = {
        "blocks": MAX_BLOCKS_PER_SM,
        "threads": MAX_WARPS_PER_SM // warps,
        "registers": (REGISTERS_PER_SM // registers_per_warp) // warps if registers else MAX_BLOCKS_PER_SM,
        "shared memory": SHARED_PER_SM // shared_per_block if shared <= SHARED_PER_BLOCK_MAX else 0,
    }
    blocks = min(limits.values())
    limited_by = ", ".join(k for k, v in limits.items() if v == blocks)
    return blocks, blocks * warps / MAX_WARPS_PER_SM, limited_by


def read_allowlist():
    """kernel name -> reason, from lines 'name -- reason' ('#' starts a comment)."""
    allowed = {}
    if ALLOWLIST.exists():
        for raw in ALLOWLIST.read_text().splitlines():
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            name, sep, reason = line.partition(" -- ")
            if not sep or not reason.strip():
                sys.exit(f"kernel_resources: {ALLOWLIST.name}: '{raw}' needs the form 'kernel -- reason'")
            allowed[name.strip()] = reason.strip()
    return allowed


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="also write the markdown table to this file")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="parallel nvcc processes")
    args = parser.parse_args()

    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None)
    if not nvcc:
        print("kernel_resources: nvcc not found (PATH or /usr/local/cuda/bin)", file=sys.stderr)
        return 2
    sources = cu_sources()
    cuobjdump = shutil.which("cuobjdump") or shutil.which("cuobjdump", path=str(Path(nvcc).parent))
    kernels = []
    with tempfile.TemporaryDirectory() as scratch, concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for source, report, error, ptx, cubin in pool.map(lambda s: compile_one(nvcc, s, scratch), sources):
            if error is not None:
                print(f"kernel_resources: {source.relative_to(ROOT)} does not compile:\n{error}", file=sys.stderr)
                return 2
            found = parse_report(source, report)
            ptx_counts = ptx_mma_counts(ptx)
            sass_counts = sass_mma_counts(cuobjdump, cubin) if cuobjdump else {}
            for k in found:
                k.ptx_mma = ptx_counts.get(k.mangled, 0)
                if cuobjdump:
                    k.sass_mma = sass_counts.get(k.mangled, 0)
            kernels += found
    for kernel, name in zip(kernels, readable_names([k.mangled for k in kernels])):
        kernel.name = name
    kernels.sort(key=lambda k: (k.source, k.name))

    rows, unlisted_spills, missing, no_tensor_cores = [], [], [], []
    stale = sorted(TENSOR_CORE_KERNELS - {k.name.split("<", 1)[0] for k in kernels})
    allowed = read_allowlist()
    for k in kernels:
        base = k.name.split("<", 1)[0]
        threads = BLOCK_THREADS.get(base)
        if threads is None:
            missing.append(f"{k.name} ({k.source})")
            continue
        blocks, fraction, limited_by = occupancy(threads, k.registers, k.shared_bytes)
        spills = k.spill_stores + k.spill_loads
        note = ""
        if spills:
            if k.name in allowed:
                note = f" (allowed: {allowed[k.name]})"
            else:
                unlisted_spills.append(k.name)
        if base in TENSOR_CORE_KERNELS and (k.ptx_mma == 0 or k.sass_mma == 0):
            no_tensor_cores.append(f"{k.name} ({k.source})")
        sass = "" if k.sass_mma < 0 else f" / {k.sass_mma}"
        rows.append(f"| `{k.name}` | {k.source} | {threads} | {k.registers} | {k.spill_stores} / {k.spill_loads}{note} "
                    f"| {k.stack_bytes} | {k.shared_bytes} | {blocks} | {fraction:.0%} | {limited_by} "
                    f"| {k.ptx_mma}{sass} |")

    table = "\n".join([
        f"Static resources per kernel ({ARCH}, `{Path(nvcc).name} -O3 -Xptxas -v`; "
        + ", ".join(f"{Path(f).name} for {arch}" for f, (arch, _) in ARCH_OF.items())
        + ") and theoretical occupancy on an H100 at the launch block size.",
        "",
        "| kernel | file | threads/block | registers | spill stores / loads (B) | stack (B) | static smem (B) "
        "| blocks/SM | occupancy | limited by | tensor-core ops, PTX" + (" / SASS |" if cuobjdump else " |"),
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |",
        *rows,
    ])
    print(table)
    if args.out:
        Path(args.out).write_text(table + "\n")
    if missing:
        print("kernel_resources: no block size in BLOCK_THREADS for: " + "; ".join(missing), file=sys.stderr)
        return 2
    if stale:
        print("kernel_resources: TENSOR_CORE_KERNELS names kernels that no file defines: " + ", ".join(stale),
              file=sys.stderr)
        return 2
    if no_tensor_cores:
        print("kernel_resources: no tensor-core instruction (" + ("PTX mma or SASS HMMA" if cuobjdump else "PTX mma")
              + ") in: " + "; ".join(no_tensor_cores), file=sys.stderr)
        return 1
    if unlisted_spills:
        print(f"kernel_resources: register spills in {', '.join(unlisted_spills)}: fix them or list each in "
              f"{ALLOWLIST.relative_to(ROOT)} as 'kernel -- reason'", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
