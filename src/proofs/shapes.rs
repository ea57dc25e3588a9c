//! Dispatch from a runtime sector size to filecoin-proofs' compile-time tree shapes.

/// Calls `$f::<Tree>($args…)` with the Merkle tree shape of `$size`, or evaluates to an
/// `InvalidInput` error for a size cuzk does not prove.
macro_rules! with_shape {
    ($size:expr, $f:ident [$($g:ty),*] $(, $args:expr)* $(,)?) => {{
        use filecoin_proofs::{
            SectorShape2KiB, SectorShape32GiB, SectorShape512MiB, SectorShape64GiB,
            SectorShape8MiB, SECTOR_SIZE_2_KIB, SECTOR_SIZE_32_GIB, SECTOR_SIZE_512_MIB,
            SECTOR_SIZE_64_GIB, SECTOR_SIZE_8_MIB,
        };
        match $size {
            SECTOR_SIZE_2_KIB => $f::<SectorShape2KiB $(, $g)*>($($args),*),
            SECTOR_SIZE_8_MIB => $f::<SectorShape8MiB $(, $g)*>($($args),*),
            SECTOR_SIZE_512_MIB => $f::<SectorShape512MiB $(, $g)*>($($args),*),
            SECTOR_SIZE_32_GIB => $f::<SectorShape32GiB $(, $g)*>($($args),*),
            SECTOR_SIZE_64_GIB => $f::<SectorShape64GiB $(, $g)*>($($args),*),
            other => Err($crate::pipeline::ProveError::InvalidInput(format!(
                "unsupported sector size {other} (2KiB, 8MiB, 512MiB, 32GiB and 64GiB are)"
            ))),
        }
    }};
    ($size:expr, $f:ident $(, $args:expr)* $(,)?) => {
        $crate::proofs::shapes::with_shape!($size, $f [] $(, $args)*)
    };
}
pub(crate) use with_shape;

/// Sector sizes cuzk proves, in bytes.
pub const SECTOR_SIZES: [u64; 5] = [1 << 11, 1 << 23, 1 << 29, 1 << 35, 1 << 36];

/// Parses `2KiB`, `8MiB`, `512MiB`, `32GiB`, `64GiB` or a plain byte count.
pub fn parse_sector_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = if let Some(n) = t.strip_suffix("KiB") {
        (n, 1u64 << 10)
    } else if let Some(n) = t.strip_suffix("MiB") {
        (n, 1 << 20)
    } else if let Some(n) = t.strip_suffix("GiB") {
        (n, 1 << 30)
    } else {
        (t, 1)
    };
    let v: u64 = num
        .trim()
        .parse()
        .map_err(|_| format!("bad sector size {s:?}"))?;
    let size = v
        .checked_mul(mult)
        .ok_or_else(|| format!("sector size {s:?} overflows"))?;
    if SECTOR_SIZES.contains(&size) {
        Ok(size)
    } else {
        Err(format!(
            "unsupported sector size {s:?} (2KiB, 8MiB, 512MiB, 32GiB, 64GiB)"
        ))
    }
}

/// `2048` → `2KiB`.
pub fn format_sector_size(size: u64) -> String {
    match size {
        s if s >= 1 << 30 && s % (1 << 30) == 0 => format!("{}GiB", s >> 30),
        s if s >= 1 << 20 && s % (1 << 20) == 0 => format!("{}MiB", s >> 20),
        s if s >= 1 << 10 && s % (1 << 10) == 0 => format!("{}KiB", s >> 10),
        s => s.to_string(),
    }
}
