//! Consistency of the Debian packaging with the crate (the package itself is built and
//! installed by scripts/check-packaging.sh).

use std::path::PathBuf;

fn read(rel: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// A version bump needs a Debian changelog entry: `cargo deb` would otherwise build a
/// package whose changelog names another version.
#[test]
fn changelog_names_the_crate_version() {
    let changelog = read("packaging/changelog");
    let first = changelog.lines().next().unwrap_or_default();
    let expected = format!("cuzk ({}-", env!("CARGO_PKG_VERSION"));
    assert!(
        first.starts_with(&expected),
        "packaging/changelog starts with {first:?}; add an entry for {}",
        env!("CARGO_PKG_VERSION")
    );
}

/// Every asset in `[package.metadata.deb]` is in the expected file list, and the units,
/// man pages and example configuration it names exist.
#[test]
fn deb_assets_are_listed() {
    let manifest: toml::Table = read("Cargo.toml").parse().expect("Cargo.toml parses");
    let assets = manifest["package"]["metadata"]["deb"]["assets"]
        .as_array()
        .expect("[package.metadata.deb] assets");
    let contents = read("packaging/deb-contents.txt");
    for asset in assets {
        let pair = asset.as_array().expect("assets are [source, dest, mode]");
        let (source, dest) = (pair[0].as_str().unwrap(), pair[1].as_str().unwrap());
        let installed = if dest.ends_with('/') {
            format!("/{dest}{}", source.rsplit('/').next().unwrap())
        } else {
            format!("/{dest}")
        };
        let installed = if installed.starts_with("/usr/share/man/") {
            format!("{installed}.gz")
        } else {
            installed
        };
        assert!(
            contents.lines().any(|l| l == installed),
            "{installed} (from {source}) is missing from packaging/deb-contents.txt"
        );
        if !source.starts_with("target/") {
            let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(source);
            assert!(path.is_file(), "asset {source} does not exist");
        }
    }
}
