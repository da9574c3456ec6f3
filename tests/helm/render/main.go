// helm-render: renders a Helm chart the way `helm template` does, for CI on
// machines where Helm cannot be installed.  Built offline from Debian's
// packages only (golang-go, golang-github-masterminds-sprig-dev,
// golang-gopkg-yaml.v3-dev) in GOPATH mode; see tests/helm/run.sh.
//
// It implements the parts of Helm's engine the eai-sandbox chart uses:
// Go text/template with sprig's function map (minus env/expandenv, as Helm),
// Helm's own functions (include, tpl, required, toYaml, fromYaml, toJson,
// fromJson, lookup -> always empty as in `helm template`), values coalescing
// (chart values.yaml, then -f files, then --set/--set-json; null deletes),
// .Release, .Chart, .Capabilities (KubeVersion, APIVersions.Has), .Template,
// kubeVersion constraint of Chart.yaml, and missingkey=zero.
// It does NOT implement subcharts, .Files, hooks ordering, or values schema
// validation (tests/helm/validate.js checks values.schema.json with ajv).
//
// Output: JSON {"values": {...}, "manifests": [{"source": ..., "object": {...}}], "notes": "..."}.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"

	"github.com/Masterminds/semver"
	"github.com/Masterminds/sprig"
	"gopkg.in/yaml.v3"
)

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

type chartMeta struct {
	Name        string `yaml:"name"`
	Version     string `yaml:"version"`
	AppVersion  string `yaml:"appVersion"`
	Description string `yaml:"description"`
	Type        string `yaml:"type"`
	KubeVersion string `yaml:"kubeVersion"`
	APIVersion  string `yaml:"apiVersion"`
}

func die(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "helm-render: "+format+"\n", a...)
	os.Exit(1)
}

// normalize turns yaml.v3 output into JSON-compatible values.
func normalize(v interface{}) interface{} {
	switch t := v.(type) {
	case map[string]interface{}:
		for k, x := range t {
			t[k] = normalize(x)
		}
		return t
	case map[interface{}]interface{}:
		m := map[string]interface{}{}
		for k, x := range t {
			m[fmt.Sprint(k)] = normalize(x)
		}
		return m
	case []interface{}:
		for i, x := range t {
			t[i] = normalize(x)
		}
		return t
	default:
		return v
	}
}

func readYAMLMap(path string) map[string]interface{} {
	b, err := os.ReadFile(path)
	if err != nil {
		die("%v", err)
	}
	var v interface{}
	if err := yaml.Unmarshal(b, &v); err != nil {
		die("%s: %v", path, err)
	}
	if v == nil {
		return map[string]interface{}{}
	}
	m, ok := normalize(v).(map[string]interface{})
	if !ok {
		die("%s: top level is not a map", path)
	}
	return m
}

// coalesce merges src over dst (Helm: maps merge deeply, null deletes).
func coalesce(dst, src map[string]interface{}) map[string]interface{} {
	for k, sv := range src {
		if sv == nil {
			delete(dst, k)
			continue
		}
		sm, sok := sv.(map[string]interface{})
		dm, dok := dst[k].(map[string]interface{})
		if sok && dok {
			dst[k] = coalesce(dm, sm)
		} else {
			dst[k] = sv
		}
	}
	return dst
}

func setPath(m map[string]interface{}, path string, v interface{}) {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]interface{})
		if !ok {
			next = map[string]interface{}{}
			m[p] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = v
}

func parseScalar(s string) interface{} {
	switch s {
	case "true":
		return true
	case "false":
		return false
	case "null":
		return nil
	}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i
	}
	if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
		var out []interface{}
		for _, x := range strings.Split(strings.Trim(s, "{}"), ",") {
			if x != "" {
				out = append(out, parseScalar(x))
			}
		}
		if out == nil {
			out = []interface{}{}
		}
		return out
	}
	return s
}

func toYAML(v interface{}) string {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return ""
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

func main() {
	var chartDir, release, namespace, kubeVersion string
	var valueFiles, sets, setJSON, apiVersions multi
	flag.StringVar(&chartDir, "chart", "", "chart directory")
	flag.StringVar(&release, "release", "eai", "release name")
	flag.StringVar(&namespace, "namespace", "eai-system", "release namespace")
	flag.StringVar(&kubeVersion, "kube-version", "v1.29.0", "Kubernetes version for .Capabilities")
	flag.Var(&valueFiles, "f", "values file (repeatable)")
	flag.Var(&sets, "set", "key.path=value (repeatable)")
	flag.Var(&setJSON, "set-json", "key.path=JSON (repeatable)")
	flag.Var(&apiVersions, "api-versions", "extra API versions for .Capabilities.APIVersions")
	flag.Parse()
	if chartDir == "" {
		die("--chart is required")
	}

	var meta chartMeta
	cb, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		die("%v", err)
	}
	if err := yaml.Unmarshal(cb, &meta); err != nil {
		die("Chart.yaml: %v", err)
	}
	if meta.APIVersion != "v2" || meta.Name == "" || meta.Version == "" {
		die("Chart.yaml: apiVersion v2, name and version are required")
	}
	if _, err := semver.StrictNewVersion(meta.Version); err != nil {
		die("Chart.yaml: version %q is not SemVer 2: %v", meta.Version, err)
	}
	kv, err := semver.NewVersion(kubeVersion)
	if err != nil {
		die("--kube-version: %v", err)
	}
	if meta.KubeVersion != "" {
		c, err := semver.NewConstraint(meta.KubeVersion)
		if err != nil {
			die("Chart.yaml kubeVersion: %v", err)
		}
		if !c.Check(kv) {
			die("chart requires kubeVersion: %s which is incompatible with Kubernetes %s", meta.KubeVersion, kubeVersion)
		}
	}

	values := readYAMLMap(filepath.Join(chartDir, "values.yaml"))
	for _, f := range valueFiles {
		values = coalesce(values, readYAMLMap(f))
	}
	for _, s := range sets {
		i := strings.Index(s, "=")
		if i < 0 {
			die("--set %q: want key=value", s)
		}
		over := map[string]interface{}{}
		setPath(over, s[:i], parseScalar(s[i+1:]))
		values = coalesce(values, over)
	}
	for _, s := range setJSON {
		i := strings.Index(s, "=")
		if i < 0 {
			die("--set-json %q: want key=json", s)
		}
		var v interface{}
		if err := json.Unmarshal([]byte(s[i+1:]), &v); err != nil {
			die("--set-json %q: %v", s, err)
		}
		over := map[string]interface{}{}
		setPath(over, s[:i], v)
		values = coalesce(values, over)
	}

	apis := map[string]bool{}
	for _, a := range []string{"v1", "apps/v1", "rbac.authorization.k8s.io/v1", "networking.k8s.io/v1",
		"node.k8s.io/v1", "policy/v1", "batch/v1", "autoscaling/v2"} {
		apis[a] = true
	}
	for _, a := range apiVersions {
		apis[a] = true
	}
	top := map[string]interface{}{
		"Values": values,
		"Release": map[string]interface{}{
			"Name": release, "Namespace": namespace, "Service": "Helm",
			"IsInstall": true, "IsUpgrade": false, "Revision": 1,
		},
		"Chart": map[string]interface{}{
			"Name": meta.Name, "Version": meta.Version, "AppVersion": meta.AppVersion,
			"Description": meta.Description, "Type": meta.Type, "KubeVersion": meta.KubeVersion,
		},
		"Capabilities": map[string]interface{}{
			"KubeVersion": map[string]interface{}{
				"Version": "v" + kv.String(), "GitVersion": "v" + kv.String(),
				"Major": fmt.Sprint(kv.Major()), "Minor": fmt.Sprint(kv.Minor()),
			},
			"APIVersions": apiSet(apis),
		},
		"Files": map[string]interface{}{},
	}

	tpl := template.New("gotpl")
	funcs := sprig.TxtFuncMap()
	delete(funcs, "env")
	delete(funcs, "expandenv")
	includedNames := map[string]int{}
	funcs["toYaml"] = func(v interface{}) string { return toYAML(v) }
	funcs["fromYaml"] = func(s string) map[string]interface{} {
		var v interface{}
		if err := yaml.Unmarshal([]byte(s), &v); err != nil {
			return map[string]interface{}{"Error": err.Error()}
		}
		m, _ := normalize(v).(map[string]interface{})
		return m
	}
	funcs["toJson"] = func(v interface{}) string { b, _ := json.Marshal(v); return string(b) }
	funcs["fromJson"] = func(s string) map[string]interface{} {
		m := map[string]interface{}{}
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			m["Error"] = err.Error()
		}
		return m
	}
	funcs["required"] = func(msg string, v interface{}) (interface{}, error) {
		if v == nil {
			return nil, fmt.Errorf(msg)
		}
		if s, ok := v.(string); ok && s == "" {
			return nil, fmt.Errorf(msg)
		}
		return v, nil
	}
	funcs["lookup"] = func(apiVersion, kind, ns, name string) (map[string]interface{}, error) {
		return map[string]interface{}{}, nil // as `helm template`: no cluster
	}
	funcs["include"] = func(name string, data interface{}) (string, error) {
		if includedNames[name] > 1000 {
			return "", fmt.Errorf("rendering template has a nested reference name: %s", name)
		}
		includedNames[name]++
		defer func() { includedNames[name]-- }()
		var buf strings.Builder
		if err := tpl.ExecuteTemplate(&buf, name, data); err != nil {
			return "", err
		}
		return buf.String(), nil
	}
	funcs["tpl"] = func(text string, data interface{}) (string, error) {
		t, err := tpl.Clone()
		if err != nil {
			return "", err
		}
		t, err = t.New("tpl").Parse(text)
		if err != nil {
			return "", err
		}
		var buf strings.Builder
		if err := t.Execute(&buf, data); err != nil {
			return "", err
		}
		return buf.String(), nil
	}
	tpl.Funcs(funcs).Option("missingkey=zero")

	tdir := filepath.Join(chartDir, "templates")
	var files []string
	err = filepath.WalkDir(tdir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		die("%v", err)
	}
	sort.Strings(files)
	names := map[string]string{}
	for _, f := range files {
		rel, _ := filepath.Rel(chartDir, f)
		name := meta.Name + "/" + filepath.ToSlash(rel)
		b, err := os.ReadFile(f)
		if err != nil {
			die("%v", err)
		}
		if _, err := tpl.New(name).Parse(string(b)); err != nil {
			die("parse error: %v", err)
		}
		names[name] = f
	}

	type manifest struct {
		Source string      `json:"source"`
		Object interface{} `json:"object"`
	}
	out := struct {
		Values    map[string]interface{} `json:"values"`
		Manifests []manifest             `json:"manifests"`
		Notes     string                 `json:"notes"`
		Embedded  map[string]interface{} `json:"embedded"`
	}{Values: values, Manifests: []manifest{}, Embedded: map[string]interface{}{}}
	sep := regexp.MustCompile(`(?m)^---\s*$`)
	var keys []string
	for k := range names {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, name := range keys {
		base := filepath.Base(name)
		if strings.HasPrefix(base, "_") {
			continue
		}
		data := map[string]interface{}{}
		for k, v := range top {
			data[k] = v
		}
		data["Template"] = map[string]interface{}{"Name": name, "BasePath": meta.Name + "/templates"}
		var buf strings.Builder
		if err := tpl.ExecuteTemplate(&buf, name, data); err != nil {
			die("render %s: %v", name, err)
		}
		text := strings.ReplaceAll(buf.String(), "<no value>", "")
		if base == "NOTES.txt" {
			out.Notes = text
			continue
		}
		if !strings.HasSuffix(base, ".yaml") && !strings.HasSuffix(base, ".yml") {
			continue
		}
		for i, doc := range sep.Split(text, -1) {
			var v interface{}
			if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
				die("%s (document %d) is not valid YAML: %v\n%s", name, i, err, doc)
			}
			if v == nil {
				continue
			}
			obj := normalize(v)
			out.Manifests = append(out.Manifests, manifest{Source: name, Object: obj})
			embedYAML(obj, out.Embedded)
		}
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		die("%v", err)
	}
}

// embedYAML parses the *.yaml keys of a ConfigMap (configuration files
// shipped by the chart) so the tests can check them: "<name>/<key>" -> value.
func embedYAML(obj interface{}, into map[string]interface{}) {
	m, _ := obj.(map[string]interface{})
	if m == nil || m["kind"] != "ConfigMap" {
		return
	}
	md, _ := m["metadata"].(map[string]interface{})
	data, _ := m["data"].(map[string]interface{})
	for k, v := range data {
		s, ok := v.(string)
		if !ok || !(strings.HasSuffix(k, ".yaml") || strings.HasSuffix(k, ".yml")) {
			continue
		}
		var parsed interface{}
		if err := yaml.Unmarshal([]byte(s), &parsed); err != nil {
			die("ConfigMap %v key %s is not valid YAML: %v", md["name"], k, err)
		}
		into[fmt.Sprintf("%v/%s", md["name"], k)] = normalize(parsed)
	}
}

type apiSet map[string]bool

// Has mirrors Helm's .Capabilities.APIVersions.Has.
func (a apiSet) Has(v string) bool { return a[v] }
