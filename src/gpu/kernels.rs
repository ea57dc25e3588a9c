//! The kernels' signatures on the host side, and typed launch arguments.
//!
//! A CUDA launch passes each argument as a pointer to its bytes, and the driver copies as many
//! bytes as the kernel's parameter declares: nothing checks that the host passed what the
//! kernel reads. So every kernel the host launches is named here with its parameter types,
//! [`super::device::Gpu::launch`] refuses arguments that do not match them, and a test reads
//! the `extern "C" __global__` declarations in `cuda/` and checks that this table says the same.

use super::GpuError;

/// A kernel parameter's type, as the launch passes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Ty {
    /// A device address (any `T*`).
    Ptr,
    /// A 32-bit unsigned integer (`u32`).
    U32,
    /// A 64-bit unsigned integer (`u64`).
    U64,
}

/// A kernel of the module: its name and parameter types, in order.
#[derive(Debug, PartialEq, Eq)]
pub struct Kernel {
    /// The `extern "C"` name.
    pub name: &'static str,
    /// The parameter types.
    pub params: &'static [Ty],
    /// Whether it may be launched with more dynamic shared memory than the default 48 KiB.
    pub smem_optin: bool,
}

/// A launch argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arg {
    /// A device address.
    Ptr(u64),
    /// A `u32` value.
    U32(u32),
    /// A `u64` value.
    U64(u64),
}

impl Arg {
    /// The argument's type.
    pub fn ty(&self) -> Ty {
        match self {
            Arg::Ptr(_) => Ty::Ptr,
            Arg::U32(_) => Ty::U32,
            Arg::U64(_) => Ty::U64,
        }
    }

    /// A `u32` parameter from a count or index, refused where it does not fit (the kernels'
    /// counts are 32-bit: a larger one is a size this driver must not launch).
    pub fn u32(v: impl TryInto<u32> + Copy + std::fmt::Display) -> Result<Arg, GpuError> {
        v.try_into()
            .map(Arg::U32)
            .map_err(|_| GpuError::Input(format!("{v} does not fit a kernel's u32 parameter")))
    }
}

impl Kernel {
    /// Checks `args` against the parameters.
    pub fn check(&self, args: &[Arg]) -> Result<(), GpuError> {
        // Every launch passes here: compare without allocating; describe only a mismatch.
        let same = args.len() == self.params.len()
            && args.iter().zip(self.params).all(|(a, t)| a.ty() == *t);
        if !same {
            let types: Vec<Ty> = args.iter().map(Arg::ty).collect();
            return Err(GpuError::Input(format!(
                "{}: launched with {types:?}, declared {:?}",
                self.name, self.params
            )));
        }
        Ok(())
    }
}

macro_rules! kernels {
    ($($(#[$attr:meta])* $konst:ident = $name:literal ($($ty:ident),*) $($optin:ident)?;)*) => {
        $(
            $(#[$attr])*
            pub const $konst: Kernel = Kernel {
                name: $name,
                params: &[$(Ty::$ty),*],
                smem_optin: kernels!(@optin $($optin)?),
            };
        )*
        /// Every kernel the host launches (those of the module's scaffolding too, where built).
        pub const ALL: &[&Kernel] = &[$($(#[$attr])* &$konst),*];
    };
    (@optin smem_optin) => { true };
    (@optin) => { false };
}

kernels! {
    POW_TABLES = "pow_tables"(Ptr, Ptr, Ptr, Ptr);
    NTT_TWIDDLE_TABLE = "ntt_twiddle_table"(Ptr, Ptr, Ptr, U64);
    NTT_DIT_PASS = "ntt_dit_pass"(Ptr, Ptr, Ptr, U32, U32, U32, U32, U32, Ptr, Ptr) smem_optin;
    QUOTIENT_POINTWISE = "quotient_pointwise"(Ptr, Ptr, Ptr, Ptr, U64);
    SCAN_BLOCKS = "scan_blocks"(Ptr, U32, Ptr);
    SCAN_ADD = "scan_add"(Ptr, U32, Ptr);
    COMPACT_COUNT = "compact_count"(Ptr, U32, Ptr);
    COMPACT_SCATTER = "compact_scatter"(Ptr, Ptr, U32, Ptr, Ptr, U32);
    MSM_FRONT = "msm_front"(Ptr, U32, U32, U32, U32, U32, Ptr, Ptr, Ptr, Ptr, Ptr);
    MSM_DIGITS = "msm_digits"(Ptr, Ptr, U32, U32, U32, Ptr, Ptr);
    MSM_SCATTER = "msm_scatter"(Ptr, Ptr, U32, U32, U32, Ptr, Ptr);
    MSM_MAX_BUCKET = "msm_max_bucket"(Ptr, U32, Ptr);
    MSM_CHUNKS_G1 = "msm_chunks_g1"(Ptr, Ptr, Ptr, U32, U32, U32, U32, U32, Ptr, Ptr, Ptr);
    MSM_CHUNKS_G2 = "msm_chunks_g2"(Ptr, Ptr, Ptr, U32, U32, U32, U32, U32, Ptr, Ptr, Ptr);
    MSM_AFFINE_INIT_G1 = "msm_affine_init_g1"(Ptr, Ptr, Ptr, U32, U32, U32, U32, Ptr, Ptr, Ptr, Ptr);
    MSM_AFFINE_INVERT = "msm_affine_invert"(Ptr, U32);
    MSM_AFFINE_STEP_G1 = "msm_affine_step_g1"(Ptr, Ptr, Ptr, U32, U32, U32, U32, Ptr, Ptr, Ptr, Ptr);
    MSM_COMBINE_G1 = "msm_combine_g1"(Ptr, U32, U32, Ptr, Ptr, Ptr);
    MSM_COMBINE_G2 = "msm_combine_g2"(Ptr, U32, U32, Ptr, Ptr, Ptr);
    MSM_REDUCE_SEGMENTS_G1 = "msm_reduce_segments_g1"(Ptr, U32, U32, U32, Ptr);
    MSM_REDUCE_SEGMENTS_G2 = "msm_reduce_segments_g2"(Ptr, U32, U32, U32, Ptr);
    MSM_REDUCE_GROUPS_G1 = "msm_reduce_groups_g1"(Ptr, Ptr, U32, U32, U32);
    MSM_REDUCE_GROUPS_G2 = "msm_reduce_groups_g2"(Ptr, Ptr, U32, U32, U32);
    MSM_TO_JACOBIAN_G1 = "msm_to_jacobian_g1"(Ptr, Ptr, U32);
    MSM_TO_JACOBIAN_G2 = "msm_to_jacobian_g2"(Ptr, Ptr, U32);
    BATCH_ADD_G1 = "batch_add_g1"(Ptr, Ptr, U32, U32, Ptr);
    BATCH_ADD_G2 = "batch_add_g2"(Ptr, Ptr, U32, U32, Ptr);
    R1CS_ROWS = "r1cs_rows"(Ptr, Ptr, Ptr, Ptr, Ptr, Ptr, U32);
    #[cfg(feature = "scaffolding")]
    SELFTEST_FP = "selftest_fp"(Ptr, Ptr, Ptr, U32);
    #[cfg(feature = "scaffolding")]
    SELFTEST_FR_FROM_MONT = "selftest_fr_from_mont"(Ptr, Ptr, U32);
    #[cfg(feature = "scaffolding")]
    SELFTEST_G1 = "selftest_g1"(Ptr, Ptr, Ptr, U32);
    #[cfg(feature = "scaffolding")]
    SETUP_MUL_G1 = "setup_mul_g1"(Ptr, Ptr, U32, Ptr);
    #[cfg(feature = "scaffolding")]
    SETUP_MUL_G2 = "setup_mul_g2"(Ptr, Ptr, U32, Ptr);
    #[cfg(feature = "scaffolding")]
    SETUP_AFFINE_G1 = "setup_affine_g1"(Ptr, U32, Ptr);
    #[cfg(feature = "scaffolding")]
    SETUP_AFFINE_G2 = "setup_affine_g2"(Ptr, U32, Ptr);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `extern "C" __global__` kernels declared in `text` with their parameter types; a
    /// kernel of a macro taking `G` (`name_##G`) is declared once per invocation `MACRO(g, …)`
    /// found in the same text.
    fn declared(text: &str) -> Vec<(String, Vec<Ty>)> {
        let flat = text.replace("\\\n", " ");
        let mut out = Vec::new();
        for (i, _) in flat.match_indices("extern \"C\" __global__") {
            let decl = &flat[i..];
            let open = decl.find('(').expect("a parameter list");
            // The name is the last word before the parenthesis (after qualifiers such as
            // __launch_bounds__(…), whose own parenthesis comes first: skip it).
            let (head, params) = if decl[..open].contains("__launch_bounds__") {
                let after = decl[open..].find(')').expect("closing") + open + 1;
                let open2 = decl[after..].find('(').expect("a parameter list") + after;
                (&decl[after..open2], &decl[open2 + 1..])
            } else {
                (&decl[..open], &decl[open + 1..])
            };
            let name = head.split_whitespace().last().expect("a name").to_string();
            let params = &params[..params.find(')').expect("closing")];
            let types: Vec<Ty> = params
                .split(',')
                .map(|p| {
                    let p = p.trim();
                    if p.contains('*') {
                        Ty::Ptr
                    } else if p.starts_with("u32 ") {
                        Ty::U32
                    } else if p.starts_with("u64 ") {
                        Ty::U64
                    } else {
                        panic!("{name}: parameter {p:?} of a type this table does not know")
                    }
                })
                .collect();
            match name.strip_suffix("_##G") {
                Some(stem) => {
                    let defining = flat[..i].rfind("#define ").expect("the macro");
                    let macro_name = flat[defining + 8..]
                        .split(|c: char| c == '(' || c.is_whitespace())
                        .next()
                        .expect("a macro name");
                    for (j, _) in flat.match_indices(&format!("\n{macro_name}(")) {
                        let arg = flat[j + macro_name.len() + 2..]
                            .split(',')
                            .next()
                            .expect("an argument")
                            .trim();
                        out.push((format!("{stem}_{arg}"), types.clone()));
                    }
                }
                None => out.push((name, types)),
            }
        }
        out
    }

    #[test]
    fn the_table_matches_the_kernels_declared_in_cuda() {
        let mut declared: Vec<(String, Vec<Ty>)> = super::super::compile::SOURCES
            .iter()
            .flat_map(|(_, text)| declared(text))
            .collect();
        declared.sort();
        let mut table: Vec<(String, Vec<Ty>)> = ALL
            .iter()
            .map(|k| (k.name.to_string(), k.params.to_vec()))
            .collect();
        table.sort();
        assert!(declared.len() >= 25, "parsed only {declared:?}");
        assert_eq!(table, declared);
    }

    #[test]
    fn a_launch_with_other_arguments_is_refused() {
        let ok = [Arg::Ptr(1), Arg::U32(2), Arg::Ptr(3)];
        assert!(SCAN_BLOCKS.check(&ok).is_ok());
        assert!(SCAN_BLOCKS
            .check(&[Arg::Ptr(1), Arg::U64(2), Arg::Ptr(3)])
            .is_err());
        assert!(SCAN_BLOCKS.check(&ok[..2]).is_err());
        assert!(Arg::u32(u64::from(u32::MAX)).is_ok());
        assert!(Arg::u32(u64::from(u32::MAX) + 1).is_err());
    }
}
