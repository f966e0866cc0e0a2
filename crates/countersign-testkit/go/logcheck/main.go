// Command logcheck checks countersign's transparency-log formats with Go's reference
// implementation (golang.org/x/mod/sumdb/note and sumdb/tlog), and makes a log of its own for
// countersign to check. It reads one JSON request on stdin and writes one JSON answer on
// stdout; any failed check exits 1 with the reason on stderr.
//
//	logcheck verify < request.json   checks a note, its cosignature and proofs made in Rust
//	logcheck make < request.json     builds a tree, signs and cosigns a checkpoint in Go
package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

type inclusion struct {
	Index int64       `json:"index"`
	Proof []tlog.Hash `json:"proof"`
}

type consistency struct {
	OldSize int64       `json:"old_size"`
	Proof   []tlog.Hash `json:"proof"`
}

type verifyRequest struct {
	LogKey      string        `json:"log_vkey"`
	WitnessKey  string        `json:"witness_vkey"`
	Note        string        `json:"note"`
	Leaves      [][]byte      `json:"leaves"`
	Inclusion   []inclusion   `json:"inclusion"`
	Consistency []consistency `json:"consistency"`
}

type makeRequest struct {
	Origin  string   `json:"origin"`
	Witness string   `json:"witness"`
	Time    uint64   `json:"time"`
	Leaves  [][]byte `json:"leaves"`
	Index   int64    `json:"index"`
	OldSize int64    `json:"old_size"`
}

type makeAnswer struct {
	LogKey      string      `json:"log_vkey"`
	WitnessKey  string      `json:"witness_vkey"`
	Note        string      `json:"note"`
	Inclusion   []tlog.Hash `json:"inclusion"`
	Consistency []tlog.Hash `json:"consistency"`
	OldRoot     tlog.Hash   `json:"old_root"`
}

// memory is a tlog.HashReader over all stored hashes of a tree.
type memory []tlog.Hash

func (m memory) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		if x < 0 || x >= int64(len(m)) {
			return nil, fmt.Errorf("no stored hash %d", x)
		}
		out[i] = m[x]
	}
	return out, nil
}

func build(leaves [][]byte) (memory, error) {
	var m memory
	for i, leaf := range leaves {
		hashes, err := tlog.StoredHashes(int64(i), leaf, m)
		if err != nil {
			return nil, err
		}
		m = append(m, hashes...)
	}
	return m, nil
}

// checkpoint parses a C2SP tlog-checkpoint body: origin, size, root, extension lines.
func checkpoint(text string) (origin string, size int64, root tlog.Hash, err error) {
	lines := strings.SplitAfter(text, "\n")
	if len(lines) < 4 || lines[len(lines)-1] != "" {
		return "", 0, root, errors.New("malformed checkpoint")
	}
	origin = strings.TrimSuffix(lines[0], "\n")
	size, err = strconv.ParseInt(strings.TrimSuffix(lines[1], "\n"), 10, 64)
	if err != nil {
		return "", 0, root, err
	}
	root, err = tlog.ParseHash(strings.TrimSuffix(lines[2], "\n"))
	return origin, size, root, err
}

// The C2SP tlog-cosignature/v1 Ed25519 type (algorithm byte 0x04), which this version of
// sumdb/note does not know: note.Open and note.Sign frame the lines, this signs the message.
const algCosignatureV1 = 4

func cosignatureKeyHash(name string, pub ed25519.PublicKey) uint32 {
	h := sha256.New()
	h.Write([]byte(name + "\n"))
	h.Write([]byte{algCosignatureV1})
	h.Write(pub)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

func cosignedMessage(t uint64, text []byte) []byte {
	return append([]byte(fmt.Sprintf("cosignature/v1\ntime %d\n", t)), text...)
}

type cosigVerifier struct {
	name string
	hash uint32
	pub  ed25519.PublicKey
}

func (v cosigVerifier) Name() string    { return v.name }
func (v cosigVerifier) KeyHash() uint32 { return v.hash }
func (v cosigVerifier) Verify(msg, sig []byte) bool {
	if len(sig) != 8+ed25519.SignatureSize {
		return false
	}
	t := binary.BigEndian.Uint64(sig[:8])
	return t <= 1<<63-1 && ed25519.Verify(v.pub, cosignedMessage(t, msg), sig[8:])
}

func parseCosigVerifier(vkey string) (cosigVerifier, error) {
	parts := strings.SplitN(vkey, "+", 3)
	if len(parts) != 3 {
		return cosigVerifier{}, errors.New("malformed witness key")
	}
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(raw) != 1+ed25519.PublicKeySize || raw[0] != algCosignatureV1 {
		return cosigVerifier{}, errors.New("malformed witness key")
	}
	v := cosigVerifier{name: parts[0], pub: ed25519.PublicKey(raw[1:])}
	v.hash = cosignatureKeyHash(v.name, v.pub)
	if fmt.Sprintf("%08x", v.hash) != parts[1] {
		return cosigVerifier{}, errors.New("witness key hash mismatch")
	}
	return v, nil
}

type cosigSigner struct {
	cosigVerifier
	priv ed25519.PrivateKey
	time uint64
}

func (s cosigSigner) Sign(msg []byte) ([]byte, error) {
	sig := make([]byte, 8, 8+ed25519.SignatureSize)
	binary.BigEndian.PutUint64(sig, s.time)
	return append(sig, ed25519.Sign(s.priv, cosignedMessage(s.time, msg))...), nil
}

func verify(req verifyRequest) error {
	logV, err := note.NewVerifier(req.LogKey)
	if err != nil {
		return fmt.Errorf("log key: %v", err)
	}
	n, err := note.Open([]byte(req.Note), note.VerifierList(logV))
	if err != nil {
		return fmt.Errorf("log signature: %v", err)
	}
	origin, size, root, err := checkpoint(n.Text)
	if err != nil {
		return err
	}
	if origin != logV.Name() {
		return errors.New("origin is not the log key's name")
	}
	if req.WitnessKey != "" {
		w, err := parseCosigVerifier(req.WitnessKey)
		if err != nil {
			return err
		}
		if _, err := note.Open([]byte(req.Note), note.VerifierList(w)); err != nil {
			return fmt.Errorf("cosignature: %v", err)
		}
	}
	m, err := build(req.Leaves)
	if err != nil {
		return err
	}
	if int64(len(req.Leaves)) != size {
		return fmt.Errorf("checkpoint size %d, %d leaves", size, len(req.Leaves))
	}
	mine, err := tlog.TreeHash(size, m)
	if err != nil {
		return err
	}
	if mine != root {
		return fmt.Errorf("checkpoint root %v, Go's root %v", root, mine)
	}
	for _, p := range req.Inclusion {
		leaf := tlog.RecordHash(req.Leaves[p.Index])
		if err := tlog.CheckRecord(p.Proof, size, root, p.Index, leaf); err != nil {
			return fmt.Errorf("inclusion of %d: %v", p.Index, err)
		}
	}
	for _, p := range req.Consistency {
		old, err := tlog.TreeHash(p.OldSize, m)
		if err != nil {
			return err
		}
		if err := tlog.CheckTree(p.Proof, size, root, p.OldSize, old); err != nil {
			return fmt.Errorf("consistency from %d: %v", p.OldSize, err)
		}
	}
	return nil
}

func makeLog(req makeRequest) (makeAnswer, error) {
	var out makeAnswer
	m, err := build(req.Leaves)
	if err != nil {
		return out, err
	}
	size := int64(len(req.Leaves))
	root, err := tlog.TreeHash(size, m)
	if err != nil {
		return out, err
	}
	if out.OldRoot, err = tlog.TreeHash(req.OldSize, m); err != nil {
		return out, err
	}
	if out.Inclusion, err = tlog.ProveRecord(size, req.Index, m); err != nil {
		return out, err
	}
	if out.Consistency, err = tlog.ProveTree(size, req.OldSize, m); err != nil {
		return out, err
	}
	skey, vkey, err := note.GenerateKey(rand.Reader, req.Origin)
	if err != nil {
		return out, err
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		return out, err
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return out, err
	}
	w := cosigSigner{cosigVerifier{name: req.Witness, pub: pub}, priv, req.Time}
	w.hash = cosignatureKeyHash(w.name, pub)
	text := fmt.Sprintf("%s\n%d\n%s\n", req.Origin, size, root)
	signed, err := note.Sign(&note.Note{Text: text}, signer, w)
	if err != nil {
		return out, err
	}
	out.LogKey = vkey
	out.WitnessKey = fmt.Sprintf("%s+%08x+%s", w.name, w.hash,
		base64.StdEncoding.EncodeToString(append([]byte{algCosignatureV1}, pub...)))
	out.Note = string(signed)
	return out, nil
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: logcheck verify|make < request.json")
		os.Exit(2)
	}
	dec := json.NewDecoder(os.Stdin)
	var err error
	switch os.Args[1] {
	case "verify":
		var req verifyRequest
		if err = dec.Decode(&req); err == nil {
			err = verify(req)
		}
		if err == nil {
			fmt.Println(`{"ok":true}`)
		}
	case "make":
		var req makeRequest
		var out makeAnswer
		if err = dec.Decode(&req); err == nil {
			out, err = makeLog(req)
		}
		if err == nil {
			err = json.NewEncoder(os.Stdout).Encode(out)
		}
	default:
		err = errors.New("unknown command " + os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "logcheck:", err)
		os.Exit(1)
	}
}
