// Package callback is WeCom's callback scheme (企业微信回调, the 加解密方案 shared
// with WeChat official accounts): the msg_signature check, the AES-256-CBC
// envelope, and the receiver that turns a verified callback into Herald
// events. The fake WeCom encrypts with the same Crypter; the fidelity
// module checks both directions against an independent library.
//
// Written by hand on the standard library: the scheme is about sixty lines,
// and the Go libraries that implement it come with a whole WeChat SDK
// (HTTP clients, caches, Redis) that the node does not need. The fidelity
// test (plugins/wecomfake/fidelity) holds this code to one of them.
package callback

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha1" //nolint:gosec // WeCom's signature is SHA-1; it is the protocol, not our choice
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Errors of the scheme. A caller counts them and answers 403; none quotes
// a secret.
var (
	ErrBadKey       = errors.New("wecom callback: callback_aes_key must be 43 characters of base64 (the EncodingAESKey)")
	ErrBadSignature = errors.New("wecom callback: msg_signature does not match")
	ErrBadCipher    = errors.New("wecom callback: the encrypted text does not decrypt")
	ErrBadReceiver  = errors.New("wecom callback: the message is for another receiver id (CorpID)")
)

// blockSize is the scheme's PKCS#7 block: 32, not AES's 16.
const blockSize = 32

// Crypter signs, checks, encrypts and decrypts for one callback
// configuration: the token, the EncodingAESKey and the receiver id (the
// CorpID of a self-built app).
type Crypter struct {
	token      string
	key        []byte
	receiverID string
}

// New checks the EncodingAESKey (43 characters; the key is its base64
// decoding with "=" appended, 32 bytes).
func New(token, encodingAESKey, receiverID string) (*Crypter, error) {
	if token == "" || receiverID == "" {
		return nil, errors.New("wecom callback: callback_token and the receiver id (corp_id) are required")
	}
	if len(encodingAESKey) != 43 {
		return nil, ErrBadKey
	}
	key, err := base64.StdEncoding.DecodeString(encodingAESKey + "=")
	if err != nil || len(key) != 32 {
		return nil, ErrBadKey
	}
	return &Crypter{token: token, key: key, receiverID: receiverID}, nil
}

// Signature is msg_signature: the SHA-1, in hex, of token, timestamp,
// nonce and the encrypted text, sorted as strings and concatenated.
func (c *Crypter) Signature(timestamp, nonce, encrypted string) string {
	parts := []string{c.token, timestamp, nonce, encrypted}
	slices.Sort(parts)
	sum := sha1.Sum([]byte(strings.Join(parts, ""))) //nolint:gosec // the protocol's hash
	return hex.EncodeToString(sum[:])
}

// Verify checks msg_signature in constant time.
func (c *Crypter) Verify(signature, timestamp, nonce, encrypted string) error {
	want := c.Signature(timestamp, nonce, encrypted)
	if subtle.ConstantTimeCompare([]byte(strings.ToLower(signature)), []byte(want)) != 1 {
		return ErrBadSignature
	}
	return nil
}

// Decrypt opens the base64 text: AES-256-CBC with IV = the key's first 16
// bytes, PKCS#7 to 32 bytes; inside, 16 random bytes, the message length
// (4 bytes, big-endian), the message, the receiver id, which must be this
// Crypter's.
func (c *Crypter) Decrypt(encrypted string) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(encrypted)
	if err != nil || len(raw) == 0 || len(raw)%aes.BlockSize != 0 {
		return nil, ErrBadCipher
	}
	block, err := aes.NewCipher(c.key)
	if err != nil {
		return nil, ErrBadCipher
	}
	plain := make([]byte, len(raw))
	cipher.NewCBCDecrypter(block, c.key[:aes.BlockSize]).CryptBlocks(plain, raw)
	pad := int(plain[len(plain)-1])
	if pad < 1 || pad > blockSize || pad > len(plain) {
		return nil, ErrBadCipher
	}
	plain = plain[:len(plain)-pad]
	if len(plain) < 20 {
		return nil, ErrBadCipher
	}
	n := binary.BigEndian.Uint32(plain[16:20])
	if uint64(n) > uint64(len(plain)-20) {
		return nil, ErrBadCipher
	}
	msg, receiver := plain[20:20+n], plain[20+n:]
	if subtle.ConstantTimeCompare(receiver, []byte(c.receiverID)) != 1 {
		return nil, ErrBadReceiver
	}
	return msg, nil
}

// Encrypt seals msg for this receiver, with 16 bytes from random (the fake
// and tests pass crypto/rand.Reader or a fixed reader).
func (c *Crypter) Encrypt(msg []byte, random io.Reader) (string, error) {
	var buf bytes.Buffer
	prefix := make([]byte, 16)
	if _, err := io.ReadFull(random, prefix); err != nil {
		return "", fmt.Errorf("wecom callback: random: %w", err)
	}
	buf.Write(prefix)
	if len(msg) > 1<<31 {
		return "", errors.New("wecom callback: message too long")
	}
	_ = binary.Write(&buf, binary.BigEndian, uint32(len(msg))) //nolint:gosec // bounded above
	buf.Write(msg)
	buf.WriteString(c.receiverID)
	pad := blockSize - buf.Len()%blockSize
	buf.Write(bytes.Repeat([]byte{byte(pad)}, pad))
	block, err := aes.NewCipher(c.key)
	if err != nil {
		return "", err
	}
	out := make([]byte, buf.Len())
	cipher.NewCBCEncrypter(block, c.key[:aes.BlockSize]).CryptBlocks(out, buf.Bytes())
	return base64.StdEncoding.EncodeToString(out), nil
}
