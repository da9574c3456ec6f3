//go:build tools

// Keeps helm.sh/helm/v3/cmd/helm's dependencies in go.sum (go mod tidy);
// tests/cluster/helm.sh builds that package.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
