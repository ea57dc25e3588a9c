package ffi

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Filecoin's ids of the 2 KiB proof types `cuzk sample` writes (go-state-types' abi).
var ids = map[string]int64{
	"StackedDrgWinning2KiBV1":  0,
	"StackedDrgWindow2KiBV1_2": 10, // abi's StackedDrgWindow2KiBV1_1
	"StackedDrg2KiBV1":         0,  // RegisteredUpdateProof
}

type postJSON struct {
	RegisteredProof string   `json:"registered_proof"`
	Randomness      []byte   `json:"randomness"`
	MinerID         uint64   `json:"miner_id"`
	VanillaProofs   [][]byte `json:"vanilla_proofs"`
}

type snapJSON struct {
	RegisteredProof string   `json:"registered_proof"`
	ROld            []byte   `json:"comm_r_old"`
	RNew            []byte   `json:"comm_r_new"`
	DNew            []byte   `json:"comm_d_new"`
	VanillaProofs   [][]byte `json:"vanilla_proofs"`
}

func read(t *testing.T, path string, v interface{}) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func comm(t *testing.T, b []byte) [32]byte {
	var c [32]byte
	if len(b) != 32 {
		t.Fatalf("a %d-byte commitment", len(b))
	}
	copy(c[:], b)
	return c
}

// TestThroughCuzkd proves every kind through a real cuzkd with this package's functions,
// from `cuzk sample`'s inputs, half of them passed as files (SubmitFd).
func TestThroughCuzkd(t *testing.T) {
	bin, cli := os.Getenv("CUZKD"), os.Getenv("CUZK")
	if bin == "" || cli == "" {
		t.Skip("CUZKD and CUZK are not set: the daemon test needs cuzkd and cuzk " +
			"(scripts/check-go.sh sets them, with CUZK_TEST_PARAMS)")
	}
	params := os.Getenv("CUZK_TEST_PARAMS")
	if params == "" {
		params = "/var/tmp/filecoin-proof-parameters"
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "cuzk.sock")
	cfg := filepath.Join(dir, "cuzk.toml")
	config := fmt.Sprintf("[daemon]\nallow_root = %v\n[socket]\npath = %q\n[params]\ndir = %q\n[proving]\nbackend = \"cpu\"\n",
		os.Geteuid() == 0, sock, params)
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd := exec.Command(bin, "--config", cfg)
	cmd.Stderr = &stderr
	// Not under systemd: no socket activation or notify socket inherited from the caller.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LISTEN_") && !strings.HasPrefix(kv, "NOTIFY_SOCKET=") && !strings.HasPrefix(kv, "WATCHDOG_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	if out, err := exec.Command(cli, "sample", "--out", dir, "--miner-id", "1000", "--sector-number", "3").CombinedOutput(); err != nil {
		t.Fatalf("cuzk sample: %v\n%s", err, out)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no socket; stderr:\n%s", stderr.String())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	framed := New(sock, "ffi-test")
	passed := &Prover{Socket: sock, Name: "ffi-test", FileThreshold: 1}

	c1, err := os.ReadFile(filepath.Join(dir, "c1.json"))
	if err != nil {
		t.Fatal(err)
	}
	seal, err := passed.SealCommitPhase2(ctx, c1, 3, 1000)
	if err != nil || len(seal) != 192 {
		t.Fatalf("SealCommitPhase2 (a passed file): %d bytes, %v; stderr:\n%s", len(seal), err, stderr.String())
	}

	var win postJSON
	read(t, filepath.Join(dir, "winning-post.json"), &win)
	wp, err := framed.GenerateWinningPoStWithVanilla(ctx, RegisteredPoStProof(ids[win.RegisteredProof]), ActorID(win.MinerID), win.Randomness, win.VanillaProofs)
	if err != nil || len(wp) != 1 || len(wp[0].ProofBytes) != 192 || wp[0].PoStProof != 0 {
		t.Fatalf("GenerateWinningPoStWithVanilla: %+v, %v", wp, err)
	}

	var window postJSON
	read(t, filepath.Join(dir, "window-post.json"), &window)
	pt := RegisteredPoStProof(ids[window.RegisteredProof])
	part, err := passed.GenerateSinglePartitionWindowPoStWithVanilla(ctx, pt, ActorID(window.MinerID), window.Randomness, window.VanillaProofs, 0)
	if err != nil || len(part.ProofBytes) != 192 || part.PoStProof != pt {
		t.Fatalf("GenerateSinglePartitionWindowPoStWithVanilla: %+v, %v", part, err)
	}
	dl, err := framed.GenerateWindowPoStWithVanilla(ctx, pt, ActorID(window.MinerID), window.Randomness, window.VanillaProofs)
	if err != nil || len(dl) != 1 || len(dl[0].ProofBytes) != 192 {
		t.Fatalf("GenerateWindowPoStWithVanilla: %+v, %v", dl, err)
	}

	var snap snapJSON
	read(t, filepath.Join(dir, "snap.json"), &snap)
	up, err := framed.GenerateUpdateProofWithVanilla(ctx, RegisteredUpdateProof(ids[snap.RegisteredProof]),
		CommitmentCID(comm(t, snap.ROld), true), CommitmentCID(comm(t, snap.RNew), true), CommitmentCID(comm(t, snap.DNew), false),
		snap.VanillaProofs)
	if err != nil || len(up) != 192 {
		t.Fatalf("GenerateUpdateProofWithVanilla: %d bytes, %v; stderr:\n%s", len(up), err, stderr.String())
	}

	// A typed error, not a proof, for randomness of the wrong size and a bad CID.
	if _, err := framed.GenerateWinningPoStWithVanilla(ctx, 0, 1000, win.Randomness[:8], win.VanillaProofs); err == nil {
		t.Error("8 bytes of randomness accepted")
	}
	if _, err := framed.GenerateUpdateProofWithVanilla(ctx, 0, []byte{1}, nil, nil, snap.VanillaProofs); err == nil {
		t.Error("a bad CID accepted")
	}
}
