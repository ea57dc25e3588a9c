//! The GPU runtime's host-side pieces, which need no GPU: the NVRTC translation unit, the cache
//! key, window sizes, and the no-device path (a typed error, never a panic). Compiling the
//! kernels needs libnvrtc and is ignored unless asked for (`--ignored`).

use cuzk::gpu::{compile, msm, GpuError};

#[test]
fn translation_unit_is_self_contained() {
    let tu = compile::translation_unit();
    assert!(
        !tu.lines().any(|l| l.starts_with("#include \"")),
        "NVRTC gets no file system"
    );
    for (name, _) in compile::SOURCES {
        assert!(tu.contains(&format!("// ---- {name}")), "{name} missing");
    }
    for k in [
        "ntt_dit_pass",
        "msm_front",
        "msm_digits",
        "msm_max_bucket",
        "msm_scatter",
        "batch_add_g1",
        "batch_add_g2",
        "scan_blocks",
    ] {
        assert!(tu.contains(k), "kernel {k} missing");
    }
}

#[test]
fn cache_key_depends_on_arch_and_driver() {
    let a = compile::cache_key(90, 13000, &[]);
    assert_eq!(a, compile::cache_key(90, 13000, &[]));
    assert_ne!(a, compile::cache_key(90, 13010, &[]));
    assert_ne!(a, compile::cache_key(100, 13000, &[]));
    // A kernel variant gets a cubin of its own.
    assert_ne!(a, compile::cache_key(90, 13000, &["CUZK_FP_INLINE".into()]));
    assert!(a.ends_with(".cubin"));
}

#[test]
fn window_bits_stay_in_range() {
    for curve in [msm::Curve::G1, msm::Curve::G2] {
        for k in 0..31 {
            let c = msm::window_bits(1usize << k, curve);
            assert!((4..=22).contains(&c), "c = {c} for 2^{k}");
        }
    }
}

/// A device that is not there is a typed error, never a panic, on every machine: without a
/// CUDA device, the default one (`NoDevice`, the error that sends callers to the CPU); with
/// devices, the ordinal one past the last of them.
#[test]
fn no_device_is_a_typed_error() {
    // The kernel cache scripts/gpu-device-run.sh names, where a device is present.
    let options = cuzk::gpu::GpuOptions {
        kernel_cache: std::env::var_os("CUZK_GPU_CACHE").map(Into::into),
        ..cuzk::gpu::GpuOptions::default()
    };
    match cuzk::gpu::device_count() {
        Err(GpuError::NoDevice(why)) => match cuzk::gpu::try_backend(&options) {
            Err(GpuError::NoDevice(again)) => assert!(!again.is_empty(), "{why}"),
            Err(e) => panic!("unexpected error without a device: {e}"),
            Ok(b) => panic!(
                "a backend ({}) where no device was counted: {why}",
                b.name()
            ),
        },
        Err(e) => panic!("counting devices failed with another error than NoDevice: {e}"),
        Ok(n) => {
            let missing = cuzk::gpu::GpuOptions {
                ordinal: n,
                ..options
            };
            match cuzk::gpu::try_backend(&missing) {
                Ok(b) => panic!("device {n} of {n} opened: {}", b.name()),
                Err(e) => assert!(
                    !e.to_string().is_empty() && !e.is_out_of_memory(),
                    "device {n} of {n}: {e}"
                ),
            }
        }
    }
}

/// NVRTC needs no GPU, but a library that plain CI does not have on its search path (CI
/// compiles the same translation unit with the pip-installed NVRTC in scripts/check-cuda.sh),
/// so this is ignored by default and runs with `--ignored` where NVRTC is installed: on the GPU
/// host (scripts/gpu-device-run.sh), where a missing library fails it.
#[test]
#[ignore = "needs libnvrtc: run with --ignored where the CUDA toolkit is installed (scripts/gpu-device-run.sh)"]
fn nvrtc_compiles_the_kernels() {
    match compile::compile(90, &[]) {
        Ok(cubin) => assert!(cubin.len() > 100_000, "cubin of {} bytes", cubin.len()),
        Err(e) => panic!("{e}"),
    }
}
