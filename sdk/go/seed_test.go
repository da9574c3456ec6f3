package eai_test

import (
	"context"
	"os"
	"testing"
	"time"

	eai "github.com/enterprise-ai/eai-sandbox/sdk/go"
)

// The seed's Go snippet (section 7), against the live eaid of
// sdk/conformance/run.sh (EAI_SDK_LIVE=1, EAI_URL, EAI_API_KEY).  The image
// is the one that exists there (EAI_CONFORMANCE_IMAGE, python:3.11-slim).
func liveEnv(t *testing.T) (string, string) {
	if os.Getenv("EAI_SDK_LIVE") != "1" {
		t.Skip("needs a live eaid: EAI_SDK_LIVE=1 (sdk/conformance/run.sh go)")
	}
	img := os.Getenv("EAI_CONFORMANCE_IMAGE")
	if img == "" {
		img = "python:3.11-slim"
	}
	prof := os.Getenv("EAI_CONFORMANCE_PROFILE")
	if prof == "" {
		prof = "gvisor-small"
	}
	return img, prof
}

func TestSeedSnippetVerbatim(t *testing.T) {
	image, _ := liveEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// --- the seed, verbatim but for the URL and the image that exists here
	c, _ := eai.NewClient(eai.WithBaseURL(os.Getenv("EAI_URL")), eai.WithAPIKey(os.Getenv("EAI_API_KEY")))
	ex, err := c.Sandbox.Execute(ctx, map[string]any{"image": image, "profile": "gvisor-small"})
	// ---

	// The snippet sends no command: the image's own runs, as Docker and
	// Kubernetes run it (docs/images.md "The image's own command"): for the
	// python image that is python3, which reads its empty stdin and ends 0.
	if err != nil || ex == nil || ex.Status != eai.StatusSucceeded || ex.ExitCode == nil || *ex.ExitCode != 0 {
		t.Fatalf("seed snippet: ex %+v, err %v", ex, err)
	}
	if len(ex.Command) == 0 || ex.Command[0] != "python3" {
		t.Fatalf("seed snippet ran %v, not the image's own python3", ex.Command)
	}
}

func TestSeedSnippetWithCommand(t *testing.T) {
	image, profile := liveEnv(t)
	ctx := context.Background()
	c, _ := eai.NewClient(eai.WithBaseURL(os.Getenv("EAI_URL")), eai.WithAPIKey(os.Getenv("EAI_API_KEY")))
	ex, err := c.Sandbox.Execute(ctx, map[string]any{"image": image, "profile": profile,
		"command": []string{"python", "-c", "print(1)"}})
	if err != nil || ex.Status != eai.StatusSucceeded || ex.StdoutText() != "1\n" || *ex.ExitCode != 0 {
		t.Fatalf("%v %+v", err, ex)
	}
	// and the typed request
	ex, err = c.Sandbox.Execute(ctx, eai.ExecuteRequest{Image: image, Profile: profile,
		Command: []string{"python3", "-c", "import sys; sys.stdout.buffer.write(bytes([0, 255]))"}})
	if err != nil || ex.Status != eai.StatusSucceeded || string(ex.Stdout) != "\x00\xff" {
		t.Fatalf("%v %+v", err, ex)
	}
}
