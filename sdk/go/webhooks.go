package eai

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// Completion callbacks (docs/executions.md "Completion callbacks"): eaid POSTs
// the summary of a finished execution to the callback URL given on create with
//
//	Eai-Event-Id: <event id>            (the same on every retry: deduplicate on it)
//	Eai-Signature: t=<unix>,v1=<hex>    HMAC-SHA-256(secret, "<t>.<body>") in hex
const (
	SignatureHeader = "Eai-Signature"
	EventIDHeader   = "Eai-Event-Id"
	// DefaultSignatureTolerance is the usual bound of |now - t| (replays).
	DefaultSignatureTolerance = 5 * time.Minute
)

// Callback asks for a completion callback (ExecuteRequest.Callback).
type Callback struct {
	URL    string `json:"url"`
	Secret string `json:"secret"`
}

// CallbackStatus is the callback view of an execution (the secret is never shown).
type CallbackStatus struct {
	URL         string     `json:"url"`
	Attempts    int        `json:"attempts"`
	LastStatus  any        `json:"last_status"` // the HTTP status, or "error: ..." / "refused: ..."
	DeliveredAt *time.Time `json:"delivered_at"`
}

// SignCallback returns the Eai-Signature value eaid sends for body at t.
func SignCallback(secret string, t int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(t, 10) + "."))
	m.Write(body)
	return "t=" + strconv.FormatInt(t, 10) + ",v1=" + hex.EncodeToString(m.Sum(nil))
}

// VerifySignature reports whether header (the Eai-Signature value) signs body
// (the exact bytes received) with secret and its t is within tolerance of the
// clock (tolerance <= 0: no time check; DefaultSignatureTolerance is the
// usual choice).  Constant-time; a malformed header is false.
func VerifySignature(secret, header string, body []byte, tolerance time.Duration) bool {
	return verifySignatureAt(secret, header, body, tolerance, time.Now())
}

func verifySignatureAt(secret, header string, body []byte, tolerance time.Duration, now time.Time) bool {
	var t int64 = -1
	var sigs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 || strings.HasPrefix(v, "+") {
				return false
			}
			t = n
		case "v1":
			b, err := hex.DecodeString(strings.TrimSpace(v))
			if err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	if t < 0 || len(sigs) == 0 {
		return false
	}
	if tolerance > 0 {
		d := now.Sub(time.Unix(t, 0))
		if d > tolerance || d < -tolerance {
			return false
		}
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(t, 10) + "."))
	m.Write(body)
	want := m.Sum(nil)
	ok := false
	for _, s := range sigs {
		if hmac.Equal(want, s) {
			ok = true
		}
	}
	return ok
}
