//! The committed gRPC code (src/proto/grpc/cuzk.v1.rs) and descriptor set (cuzk.v1.fds.bin,
//! for server reflection) are what tonic-prost-build and protoc make of
//! proto/cuzk/v1/proving.proto, so that a build needs no protoc. Needs protoc (Debian's
//! protobuf-compiler, which scripts/test.sh installs and then runs this test); after
//! changing the .proto, run `UPDATE_GRPC=1 cargo test --release --test grpc_codegen --
//! --ignored` and commit the result.

use std::path::Path;

#[test]
#[ignore = "needs protoc (protobuf-compiler); scripts/test.sh installs it and runs this test"]
fn the_committed_grpc_code_is_generated_from_the_proto() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = tempfile::tempdir().unwrap();
    tonic_prost_build::configure()
        .build_client(false)
        .out_dir(out.path())
        .file_descriptor_set_path(out.path().join("cuzk.v1.fds.bin"))
        .compile_protos(
            &[root.join("proto/cuzk/v1/proving.proto")],
            &[root.join("proto")],
        )
        .expect("protoc and tonic-prost-build compile proto/cuzk/v1/proving.proto");
    // The code, and the descriptor set the server's reflection answers from.
    for name in ["cuzk.v1.rs", "cuzk.v1.fds.bin"] {
        let generated = std::fs::read(out.path().join(name)).unwrap();
        let committed_path = root.join("src/proto/grpc").join(name);
        if std::env::var_os("UPDATE_GRPC").is_some() {
            std::fs::write(&committed_path, &generated).unwrap();
        }
        let committed = std::fs::read(&committed_path).unwrap_or_default();
        assert!(
            committed == generated,
            "src/proto/grpc/{name} differs from what proto/cuzk/v1/proving.proto generates; \
             run `UPDATE_GRPC=1 cargo test --release --test grpc_codegen -- --ignored` and \
             commit it"
        );
    }
}
