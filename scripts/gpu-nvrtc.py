#!/usr/bin/env python3
"""Compiles cuda/ through NVRTC to PTX for sm_90, exactly as src/gpu/compile.rs assembles it.

usage: gpu-nvrtc.py LIBNVRTC OUT.ptx
The file order and the dropped `#include "..."` lines must match SOURCES in src/gpu/compile.rs.
CUZK_NVRTC_DEFINES (environment, optional): kernel variants to compile, NAME or NAME=VALUE
separated by commas or spaces (e.g. "CUZK_MSM_DFMA"), each passed as a -D option, as the
daemon's variable of the same name does (docs/gpu-notes.md).
"""
import ctypes, os, re, sys

SOURCES = ["field.cuh", "fp2.cuh", "field_f64.cuh", "curve.cuh", "ntt.cu", "scan.cu", "compact.cu", "msm.cu", "msm_affine.cu", "batch_add.cu", "r1cs.cu", "selftest.cu", "setup.cu"]
OPTIONS = [b"--gpu-architecture=compute_90", b"--std=c++17", b"-default-device"]
OPTIONS += [f"-D{d}".encode() for d in re.split(r"[,\s]+", os.environ.get("CUZK_NVRTC_DEFINES", "")) if d]

def main():
    lib = ctypes.CDLL(sys.argv[1])
    src = "".join(re.sub(r'^#include ".*"$', "", open(f"cuda/{f}").read(), flags=re.M) + "\n" for f in SOURCES)
    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"cuzk.cu", 0, None, None) == 0
    opts = (ctypes.c_char_p * len(OPTIONS))(*OPTIONS)
    rc = lib.nvrtcCompileProgram(prog, len(OPTIONS), opts)
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, log)
    if log.value.strip():
        print(log.value.decode(), file=sys.stderr)
    if rc != 0:
        sys.exit(f"nvrtc failed: {rc}")
    lib.nvrtcGetPTXSize(prog, ctypes.byref(size))
    ptx = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetPTX(prog, ptx)
    open(sys.argv[2], "wb").write(ptx.value)

main()
