"""Static analysis of the packed f32 GEMM's inner loop with LLVM's llvm-mca (issue 31).

Builds ggml's CPU ops.cpp with the vendor patches applied, once per CPU variant with the flags and
defines ggml's CMake gives that variant (GGML_CPU_ALL_VARIANTS), as assembly (g++ -O3 -S), finds the
micro-kernel's inner loop (the loop whose body holds the most vector FMAs: the full register tile,
RM x RN FMAs per k) and runs llvm-mca on that body for each -mcpu. Prints per (variant, -mcpu): the
tile's FMAs, loads and broadcasts per iteration, the block reciprocal throughput in cycles per
iteration, the FMA ports' pressure, the fraction of the FMA peak the loop reaches in steady state,
and the bottleneck llvm-mca reports. llvm-mca assumes every load hits L1: what it gives is the core's
limit, not the caches'.

    apt-get install -y llvm-19          # llvm-mca-19
    python benchmarks/gemm_mca.py                           # the patch stack of this checkout
    python benchmarks/gemm_mca.py --exclude 0040            # the stack without a patch (before)
    python benchmarks/gemm_mca.py --show sapphirerapids     # also print the loop and mca's report

FMA peak per cycle (512-bit FMAs): sapphirerapids / icelake-server / skylake-avx512 (Xeon Gold/Platinum)
2 (ports 0 and 5), znver4 1 (two 256-bit halves on its FMA pipes); haswell 2 ymm FMAs (256-bit).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ggml's vendor/ggml/src/ggml-cpu/CMakeLists.txt (non-native x86, GCC): flags and defines per feature
FEATURE_FLAGS = {
    "SSE42": (["-msse4.2"], ["GGML_SSE42"]),
    "F16C": (["-mf16c"], ["GGML_F16C"]),
    "FMA": (["-mfma"], ["GGML_FMA"]),
    "BMI2": (["-mbmi2"], ["GGML_BMI2"]),
    "AVX": (["-mavx"], ["GGML_AVX"]),
    "AVX2": (["-mavx2"], ["GGML_AVX2"]),
    "AVX512": (["-mavx512f", "-mavx512cd", "-mavx512vl", "-mavx512dq", "-mavx512bw"], ["GGML_AVX512"]),
    "AVX512_VBMI": (["-mavx512vbmi"], ["GGML_AVX512_VBMI"]),
    "AVX512_VNNI": (["-mavx512vnni"], ["GGML_AVX512_VNNI"]),
    "AVX512_BF16": (["-mavx512bf16"], ["GGML_AVX512_BF16"]),
    "AMX_TILE": (["-mamx-tile"], ["GGML_AMX_TILE"]),
    "AMX_INT8": (["-mamx-int8"], ["GGML_AMX_INT8"]),
}
# vendor/ggml/src/CMakeLists.txt: ggml_add_cpu_backend_variant(...)
VARIANTS = {
    "haswell": "SSE42 AVX F16C FMA AVX2 BMI2",
    "skylakex": "SSE42 AVX F16C FMA AVX2 BMI2 AVX512",
    "cascadelake": "SSE42 AVX F16C FMA AVX2 BMI2 AVX512 AVX512_VNNI",
    "icelake": "SSE42 AVX F16C FMA AVX2 BMI2 AVX512 AVX512_VBMI AVX512_VNNI",
    "cooperlake": "SSE42 AVX F16C FMA AVX2 BMI2 AVX512 AVX512_VNNI AVX512_BF16",
    "zen4": "SSE42 AVX F16C FMA AVX2 BMI2 AVX512 AVX512_VBMI AVX512_VNNI AVX512_BF16",
    "sapphirerapids": "SSE42 AVX F16C FMA AVX2 BMI2 AVX512 AVX512_VBMI AVX512_VNNI AVX512_BF16 AMX_TILE AMX_INT8",
}
# the CPUs each variant is analysed for: the one it is built for, and the other family's
MCPUS = {
    "haswell": ["haswell", "znver4"],
    "skylakex": ["skylake-avx512"],
    "cascadelake": ["cascadelake"],
    "icelake": ["icelake-server"],
    "cooperlake": ["cooperlake"],
    "zen4": ["znver4", "sapphirerapids"],
    "sapphirerapids": ["sapphirerapids", "icelake-server", "znver4"],
}
FMA_PER_CYCLE = {"sapphirerapids": 2, "icelake-server": 2, "skylake-avx512": 2, "cascadelake": 2, "cooperlake": 2,
                 "znver4": 1, "haswell": 2}


def patched_tree(dest: str, exclude: list[str]) -> str:
    """A copy of vendor/ggml with vendor/patches applied in name order (as CMakeLists.txt does)."""
    src = os.path.join(dest, "ggml")
    shutil.copytree(os.path.join(REPO, "vendor", "ggml", "src"), os.path.join(src, "src"))
    shutil.copytree(os.path.join(REPO, "vendor", "ggml", "include"), os.path.join(src, "include"))
    pdir = os.path.join(REPO, "vendor", "patches")
    for p in sorted(f for f in os.listdir(pdir) if f.endswith(".patch")):
        if any(p.startswith(x) for x in exclude):
            continue
        # patches touching files outside src/ and include/ (tests, examples) are applied to what exists
        subprocess.run(["patch", "-p1", "--forward", "--batch", "-s", "-i", os.path.join(pdir, p)], cwd=src,
                       check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return src


def compile_asm(src: str, variant: str, out: str, cxx: str) -> None:
    flags, defs = [], ["GGML_USE_LLAMAFILE", "GGML_USE_CPU_REPACK", "NDEBUG", "_GNU_SOURCE"]
    for feat in VARIANTS[variant].split():
        f, d = FEATURE_FLAGS[feat]
        flags += f
        defs += d
    cmd = [cxx, "-O3", "-std=gnu++17", "-fPIC", *flags, *[f"-D{d}" for d in defs],
           f"-I{src}/include", f"-I{src}/src", f"-I{src}/src/ggml-cpu", "-S", "-o", out,
           f"{src}/src/ggml-cpu/ops.cpp"]
    subprocess.run(cmd, check=True)


FMA_RE = re.compile(r"^\s*vfn?m(add|sub)\d+ps\b")
REG_RE = re.compile(r"%([xyz])mm")


def inner_loop(asm_path: str, width: str) -> list[str]:
    """Body of the loop (label .. backward jump to it, no other label inside) with the most FMAs on `width`
    registers (z or y): the largest register tile's k loop."""
    lines = open(asm_path).read().splitlines()
    best: list[str] = []
    best_n = 0
    label_at = {}
    for i, ln in enumerate(lines):
        m = re.match(r"^(\.L\w+):", ln)
        if m:
            label_at[m.group(1)] = i
            continue
        m = re.match(r"^\s*j\w+\s+(\.L\w+)\s*$", ln)
        if m and m.group(1) in label_at and label_at[m.group(1)] < i:
            body = [x for x in lines[label_at[m.group(1)] + 1:i + 1] if x.strip() and not x.strip().startswith(".")]
            if any(re.match(r"^\.L\w+:", x) for x in lines[label_at[m.group(1)] + 1:i]):
                continue
            n = sum(1 for x in body if FMA_RE.match(x) and f"%{width}mm" in x)
            if n > best_n:
                best, best_n = body, n
    return [x.split("#")[0].rstrip() for x in best]


def classify(body: list[str]) -> dict:
    fma = sum(1 for x in body if FMA_RE.match(x))
    fma_mem = sum(1 for x in body if FMA_RE.match(x) and "(" in x)
    bcast = sum(1 for x in body if re.match(r"^\s*vbroadcastss\b", x)) + sum(1 for x in body if "{1to" in x)
    vload = sum(1 for x in body if re.match(r"^\s*vmov(ups|aps)\s+-?\w*\(", x))
    return {"fma": fma, "fma_mem": fma_mem, "bcast": bcast, "vload": vload + (fma_mem - sum(1 for x in body if "{1to" in x))}


def run_mca(mca: str, body: list[str], mcpu: str) -> dict:
    text = "\n".join(body) + "\n"
    r = subprocess.run([mca, f"-mcpu={mcpu}", "-iterations=500", "-bottleneck-analysis", "-resource-pressure"],
                       input=text, capture_output=True, text=True, check=True)
    out = r.stdout
    get = lambda pat: float(re.search(pat, out).group(1))  # noqa: E731
    res = {"rthroughput": get(r"Block RThroughput:\s+([\d.]+)"), "cycles": get(r"Total Cycles:\s+([\d.]+)"),
           "iterations": get(r"Iterations:\s+([\d.]+)"), "ipc": get(r"IPC:\s+([\d.]+)"), "report": out}
    res["cyc_per_iter"] = res["cycles"]/res["iterations"]
    m = re.search(r"(Cycles with backend pressure increase.*?)(?:\n\n|\Z)", out, re.S)
    res["bottleneck"] = " ".join(m.group(1).split()) if m else "no bottleneck reported"
    if "No resource or data dependency bottlenecks discovered" in out:
        res["bottleneck"] = "none (no resource or data dependency bottlenecks discovered)"
    # port pressure: the line of resource names and the total line under "Resource pressure per iteration"
    m = re.search(r"Resource pressure per iteration:\n(.*?)\n(.*?)\n", out)
    names = re.findall(r"\[([\w.]+)\]", m.group(1))
    vals = m.group(2).split()
    idx = {}
    for line in out.splitlines():
        mm = re.match(r"\[([\w.]+)\]\s+-\s+(\S+)", line)
        if mm:
            idx[mm.group(1)] = mm.group(2)
    res["ports"] = {idx.get(n, n): v for n, v in zip(names, vals)}
    return res


def modelled_fma_rate(mca: str, mcpu: str) -> float:
    """zmm FMAs per cycle in mcpu's scheduling model: 8 independent FMAs, 1000 iterations."""
    text = "".join(f"vfmadd231ps %zmm1, %zmm2, %zmm{r}\n" for r in range(3, 11))
    out = subprocess.run([mca, f"-mcpu={mcpu}", "-iterations=1000"], input=text, capture_output=True, text=True,
                         check=True).stdout
    return 8000/float(re.search(r"Total Cycles:\s+([\d.]+)", out).group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated ggml CPU variants")
    ap.add_argument("--exclude", action="append", default=[], help="leave out patches whose name starts so")
    ap.add_argument("--mca", default=shutil.which("llvm-mca-19") or "llvm-mca")
    ap.add_argument("--cxx", default=os.environ.get("CXX", "g++"))
    ap.add_argument("--show", action="append", default=[], help="variant whose loop and mca report to print")
    ap.add_argument("--keep", help="folder to keep the patched tree and the assembly in")
    args = ap.parse_args()
    cxx_version = subprocess.run([args.cxx, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    mca_version = [x.strip() for x in subprocess.run([args.mca, "--version"], capture_output=True,
                                                     text=True).stdout.splitlines() if "version" in x][0]
    print(f"# {cxx_version}; llvm-mca {mca_version}; patches excluded: {args.exclude or 'none'}")
    mcpus = sorted({m for v in args.variants.split(",") for m in MCPUS[v]} - {"haswell"})  # no zmm
    print("# zmm FMAs per cycle in llvm-mca's model (8 independent FMAs): " + ", ".join(
        f"{m} {modelled_fma_rate(args.mca, m):.2f}" for m in mcpus) + "\n")
    print("| variant | -mcpu | FMAs/iter | vector loads | broadcasts | cycles/iter (mca) | block RThroughput "
          "| FMA port pressure | FMA peak reached | bottleneck |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        if args.keep:
            shutil.rmtree(args.keep, ignore_errors=True)
            os.makedirs(args.keep)
            tmp = args.keep
        src = patched_tree(tmp, args.exclude)
        for v in args.variants.split(","):
            asm = os.path.join(tmp, f"{v}.s")
            compile_asm(src, v, asm, args.cxx)
            width = "y" if v == "haswell" else "z"
            body = inner_loop(asm, width)
            c = classify(body)
            for mcpu in MCPUS[v]:
                r = run_mca(args.mca, body, mcpu)
                fma_ports = {k: p for k, p in r["ports"].items()
                             if k in ("SPRPort00", "SPRPort05", "SKXPort0", "SKXPort5", "ICXPort0", "ICXPort5",
                                      "Zn4FP0", "Zn4FP1", "HWPort0", "HWPort1")}
                # per cycle: 2 ymm FMAs on every one of these CPUs; zmm as FMA_PER_CYCLE
                peak = c["fma"]/r["cyc_per_iter"]/(FMA_PER_CYCLE[mcpu] if width == "z" else 2)
                ports = ", ".join(f"{k} {p}" for k, p in fma_ports.items())
                print(f"| {v} | {mcpu} | {c['fma']} | {c['vload']} | {c['bcast']} | {r['cyc_per_iter']:.2f} "
                      f"| {r['rthroughput']:.2f} | {ports} | {100*peak:.0f} % | {r['bottleneck'][:150]} |")
                if v in args.show:
                    print("\n```\n" + "\n".join(body) + "\n```\n")
                    print(r["report"])


if __name__ == "__main__":
    sys.exit(main())
