//! Run-time compilation of `cuda/` with NVRTC, cached on disk.
//!
//! The kernels are one translation unit: the files of [`SOURCES`] concatenated with their
//! `#include "..."` lines dropped (NVRTC gets no file system). NVRTC compiles it straight to a
//! cubin for the device's architecture. The cubin is cached in the directory the caller names
//! ([`super::GpuOptions::kernel_cache`], `gpu.kernel_cache`), named by the SHA-256 of the
//! source and options, the architecture and the driver version, so only the first start after
//! a change pays the compilation (seconds).

use std::ffi::{c_char, CStr, CString};
use std::path::Path;

use cudarc::nvrtc::sys as nv;
use sha2::{Digest, Sha256};

use super::GpuError;

/// The CUDA sources, in translation-unit order. `scripts/gpu-nvrtc.py` mirrors this list.
pub const SOURCES: &[(&str, &str)] = &[
    ("field.cuh", include_str!("../../cuda/field.cuh")),
    ("fp2.cuh", include_str!("../../cuda/fp2.cuh")),
    ("field_f64.cuh", include_str!("../../cuda/field_f64.cuh")),
    ("curve.cuh", include_str!("../../cuda/curve.cuh")),
    ("ntt.cu", include_str!("../../cuda/ntt.cu")),
    ("scan.cu", include_str!("../../cuda/scan.cu")),
    ("compact.cu", include_str!("../../cuda/compact.cu")),
    ("msm.cu", include_str!("../../cuda/msm.cu")),
    ("msm_affine.cu", include_str!("../../cuda/msm_affine.cu")),
    ("batch_add.cu", include_str!("../../cuda/batch_add.cu")),
    ("r1cs.cu", include_str!("../../cuda/r1cs.cu")),
    // Test kernels only (tests/gpu_kernels.rs): not in the daemon's cubin.
    #[cfg(feature = "scaffolding")]
    ("selftest.cu", include_str!("../../cuda/selftest.cu")),
    // The Groth16 setup's fixed-base multiplications (params_gen): not in the daemon's cubin.
    #[cfg(feature = "scaffolding")]
    ("setup.cu", include_str!("../../cuda/setup.cu")),
];

/// The single translation unit handed to NVRTC.
pub fn translation_unit() -> String {
    let mut out = String::new();
    for (name, text) in SOURCES {
        out.push_str(&format!("// ---- {name}\n"));
        for line in text.lines() {
            if !(line.starts_with("#include \"") && line.ends_with('"')) {
                out.push_str(line);
            }
            out.push('\n');
        }
    }
    out
}

/// NVRTC's options for `arch` (90 = sm_90) with the kernel variants `defines` (`NAME` or
/// `NAME=VALUE`, e.g. `CUZK_FP_INLINE`, from `debug.nvrtc_defines`), each a `-D` option. The
/// cache key covers the options, so variants get their own cubins.
pub fn options(arch: u32, defines: &[String]) -> Vec<String> {
    let mut o = vec![
        format!("--gpu-architecture=sm_{arch}"),
        "--std=c++17".into(),
        "-default-device".into(),
    ];
    o.extend(
        defines
            .iter()
            .map(|d| d.trim())
            .filter(|d| !d.is_empty())
            .map(|d| format!("-D{d}")),
    );
    o
}

/// The cache file name for this source, architecture, driver version and kernel variants.
pub fn cache_key(arch: u32, driver_version: i32, defines: &[String]) -> String {
    let mut h = Sha256::new();
    h.update(translation_unit().as_bytes());
    for o in options(arch, defines) {
        h.update(o.as_bytes());
    }
    format!(
        "cuzk-{}-sm{arch}-drv{driver_version}.cubin",
        &hex::encode(h.finalize())[..16]
    )
}

/// Returns the cubin for `arch` (e.g. 90) with the kernel variants `defines`, from the cache
/// directory `cache` (none: always compiled) or by compiling (and caching) it. The second value
/// says whether it came from the cache.
pub fn cubin(
    arch: u32,
    driver_version: i32,
    cache: Option<&Path>,
    defines: &[String],
) -> Result<(Vec<u8>, bool), GpuError> {
    let key = cache_key(arch, driver_version, defines);
    let path = cache.map(|d| d.join(&key));
    if let Some(p) = &path {
        if let Ok(bytes) = std::fs::read(p) {
            if !bytes.is_empty() {
                return Ok((bytes, true));
            }
        }
    }
    let bin = compile(arch, defines)?;
    if let Some(p) = &path {
        // A cache that cannot be written only costs the next start a compilation. Write to a
        // temporary name first so that a concurrent reader never sees half a file.
        if let Some(dir) = p.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let tmp = p.with_extension(format!("tmp{}", std::process::id()));
        if std::fs::write(&tmp, &bin).is_ok() {
            let _ = std::fs::rename(&tmp, p);
        }
    }
    Ok((bin, false))
}

fn nv_check(r: nv::nvrtcResult, what: &str) -> Result<(), GpuError> {
    if r == nv::nvrtcResult::NVRTC_SUCCESS {
        Ok(())
    } else {
        Err(GpuError::Compile(format!("{what}: {r:?}")))
    }
}

/// Compiles the kernels to a cubin with NVRTC (needs libnvrtc, not a GPU). `arch` 90 = sm_90;
/// `defines` as for [`options`].
pub fn compile(arch: u32, defines: &[String]) -> Result<Vec<u8>, GpuError> {
    // SAFETY: probing for the library only loads it; no NVRTC function runs if it is absent
    // (cudarc would panic on the first call otherwise).
    if !unsafe { nv::is_culib_present() } {
        return Err(GpuError::Compile(
            "libnvrtc not found (install the CUDA toolkit or nvidia-cuda-nvrtc)".into(),
        ));
    }
    let src =
        CString::new(translation_unit()).map_err(|_| GpuError::Compile("NUL in source".into()))?;
    let name = CString::new("cuzk.cu").map_err(|_| GpuError::Compile("NUL in name".into()))?;
    let opts: Vec<CString> = options(arch, defines)
        .into_iter()
        .map(|o| CString::new(o).map_err(|_| GpuError::Compile("NUL in option".into())))
        .collect::<Result<_, _>>()?;
    let opt_ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();
    let mut prog: nv::nvrtcProgram = std::ptr::null_mut();
    // SAFETY: `src` and `name` are NUL-terminated and outlive the call; no headers are passed.
    nv_check(
        unsafe {
            nv::nvrtcCreateProgram(
                &mut prog,
                src.as_ptr(),
                name.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            )
        },
        "nvrtcCreateProgram",
    )?;
    let result = compile_program(prog, &opt_ptrs);
    // SAFETY: `prog` was created above and is destroyed exactly once.
    unsafe { nv::nvrtcDestroyProgram(&mut prog) };
    result
}

fn compile_program(prog: nv::nvrtcProgram, opts: &[*const c_char]) -> Result<Vec<u8>, GpuError> {
    let n = i32::try_from(opts.len()).map_err(|_| GpuError::Compile("too many options".into()))?;
    // SAFETY: `prog` is a live program; `opts` points at `n` NUL-terminated strings that outlive
    // the call.
    let rc = unsafe { nv::nvrtcCompileProgram(prog, n, opts.as_ptr()) };
    if rc != nv::nvrtcResult::NVRTC_SUCCESS {
        return Err(GpuError::Compile(format!("{rc:?}:\n{}", program_log(prog))));
    }
    let mut size = 0usize;
    // SAFETY: `prog` compiled successfully; `size` is a valid out pointer.
    nv_check(
        unsafe { nv::nvrtcGetCUBINSize(prog, &mut size) },
        "nvrtcGetCUBINSize",
    )?;
    let mut bin = vec![0u8; size];
    // SAFETY: `bin` has exactly the size NVRTC reported.
    nv_check(
        unsafe { nv::nvrtcGetCUBIN(prog, bin.as_mut_ptr().cast()) },
        "nvrtcGetCUBIN",
    )?;
    Ok(bin)
}

fn program_log(prog: nv::nvrtcProgram) -> String {
    let mut size = 0usize;
    // SAFETY: `prog` is a live program; the buffer is as large as NVRTC says the log is.
    unsafe {
        if nv::nvrtcGetProgramLogSize(prog, &mut size) != nv::nvrtcResult::NVRTC_SUCCESS
            || size == 0
        {
            return String::new();
        }
        let mut buf = vec![0 as c_char; size];
        if nv::nvrtcGetProgramLog(prog, buf.as_mut_ptr()) != nv::nvrtcResult::NVRTC_SUCCESS {
            return String::new();
        }
        CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned()
    }
}
