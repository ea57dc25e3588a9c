//! Human-readable sizes (`"64GiB"`) and durations (`"30s"`, `"5m"`, `"1h"`).

use std::time::Duration;

/// Binary and decimal size suffixes, longest first so that `KiB` wins over `B`.
const SIZE_UNITS: &[(&str, u64)] = &[
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
    ("TiB", 1 << 40),
    ("KB", 1_000),
    ("MB", 1_000_000),
    ("GB", 1_000_000_000),
    ("TB", 1_000_000_000_000),
    ("K", 1 << 10),
    ("M", 1 << 20),
    ("G", 1 << 30),
    ("T", 1 << 40),
    ("B", 1),
];

/// Parses a size such as `"64GiB"`, `"512 MiB"`, `"1.5GiB"`, `"10MB"` or `"4096"` (bytes).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = (t[..split].trim(), t[split..].trim());
    if number.is_empty() {
        return Err(format!(
            "invalid size {text:?}: expected a number and a unit, e.g. \"64GiB\""
        ));
    }
    let multiplier = if unit.is_empty() {
        1
    } else {
        SIZE_UNITS
            .iter()
            .find(|(name, _)| *name == unit)
            .map(|(_, m)| *m)
            .ok_or_else(|| {
                format!("invalid size {text:?}: unknown unit {unit:?} (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)")
            })?
    };
    let too_large = || format!("invalid size {text:?}: too large");
    // A whole number is read exactly: through an f64, a byte count above 2^53 would change
    // (and a size that format_size wrote would not read back as itself).
    if !number.contains('.') {
        return number
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(multiplier))
            .ok_or_else(too_large);
    }
    let value: f64 = number
        .parse()
        .map_err(|_| format!("invalid size {text:?}: {number:?} is not a number"))?;
    let bytes = value * multiplier as f64;
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(too_large());
    }
    Ok(bytes.round() as u64)
}

/// Formats a byte count with the largest binary unit that divides it exactly.
pub fn format_size(bytes: u64) -> String {
    for (name, m) in [
        ("TiB", 1u64 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ] {
        if bytes >= m && bytes.is_multiple_of(m) {
            return format!("{}{name}", bytes / m);
        }
    }
    format!("{bytes}B")
}

/// Parses a duration such as `"30s"`, `"5m"`, `"1h"`, `"250ms"`, `"1h30m"`, or a bare number
/// of seconds (`"400"`, `"0"`): the same syntax for every key and command-line flag.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return t
            .parse::<u64>()
            .map(Duration::from_secs)
            .map_err(|_| format!("invalid duration {text:?}: too many seconds"));
    }
    if t.is_empty() {
        return Err("invalid duration \"\": expected e.g. \"30s\", \"5m\", \"1h\"".into());
    }
    let mut total = Duration::ZERO;
    let mut rest = t;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit_len = rest[digits..]
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len() - digits);
        let (number, unit) = (&rest[..digits], &rest[digits..digits + unit_len]);
        let n: u64 = number.parse().map_err(|_| {
            format!("invalid duration {text:?}: expected a number before each unit, e.g. \"30s\"")
        })?;
        let part = match unit {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n.saturating_mul(60)),
            "h" => Duration::from_secs(n.saturating_mul(3600)),
            "d" => Duration::from_secs(n.saturating_mul(86_400)),
            _ => {
                return Err(format!(
                    "invalid duration {text:?}: unknown unit {unit:?} (ms, s, m, h, d)"
                ))
            }
        };
        total = total.saturating_add(part);
        rest = &rest[digits + unit_len..];
    }
    Ok(total)
}

/// Formats a duration in the syntax [`parse_duration`] reads, with the largest exact unit.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        return "0s".into();
    }
    if !ms.is_multiple_of(1000) {
        return format!("{ms}ms");
    }
    let s = ms / 1000;
    for (unit, n) in [("d", 86_400u128), ("h", 3600), ("m", 60)] {
        if s.is_multiple_of(n) {
            return format!("{}{unit}", s / n);
        }
    }
    format!("{s}s")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64GiB"), Ok(64 << 30));
        assert_eq!(parse_size("512 MiB"), Ok(512 << 20));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("1.5KiB"), Ok(1536));
        assert_eq!(parse_size("10MB"), Ok(10_000_000));
        assert!(parse_size("64XB").is_err());
        assert!(parse_size("GiB").is_err());
        assert!(parse_size("").is_err());
        assert_eq!(format_size(64 << 30), "64GiB");
        assert_eq!(format_size(1000), "1000B");
        // Whole numbers are exact, past an f64's 53 bits too (found by tests/fuzz.rs).
        let big = 1_385_541_142_136_459_322u64;
        assert_eq!(parse_size(&format_size(big)), Ok(big));
        assert_eq!(parse_size("18446744073709551615"), Ok(u64::MAX));
        assert!(parse_size("18446744073709551616").is_err());
        assert!(parse_size("16777216TiB").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        // A bare number is seconds, as in every flag (`cuzk await --timeout 400`).
        assert_eq!(parse_duration("400"), Ok(Duration::from_secs(400)));
        assert_eq!(parse_duration(" 30 "), Ok(Duration::from_secs(30)));
        assert!(parse_duration("99999999999999999999999").is_err());
        assert!(parse_duration("30x").is_err());
        assert!(parse_duration("5 minutes").is_err());
        assert!(parse_duration("s").is_err());
        for s in ["30s", "5m", "1h", "250ms", "2d", "0s"] {
            assert_eq!(format_duration(parse_duration(s).unwrap()), s);
        }
    }
}
