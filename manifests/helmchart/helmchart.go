/*
Copyright The gpu-inventory-operator Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package helmchart renders and lints the Helm chart in manifests/chart with Helm's Go
// library, as `helm template` and `helm lint` do, without a helm binary. Only tests import
// it, so that Helm stays out of the binaries.
package helmchart

import (
	"errors"
	"fmt"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	commonutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/engine"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// KubeVersion is the Kubernetes version charts are rendered and linted for unless told
// otherwise: that of the API server hack/testbin builds. (In a test binary Helm's own default
// is v1.20, which the chart's kubeVersion refuses.)
const KubeVersion = "v1.37.2"

// ReleaseName is the release name the chart's README installs with.
const ReleaseName = "gpu-inventory-operator"

// Options are what `helm template` is given besides the chart.
type Options struct {
	// Namespace is --namespace.
	Namespace string
	// Values are the values given with --values or --set.
	Values map[string]any
	// KubeVersion is --kube-version; default KubeVersion.
	KubeVersion string
	// SkipCRDs leaves out the chart's crds/, as `helm install --skip-crds` does.
	SkipCRDs bool
}

// Render returns the objects `helm template --include-crds` prints: the chart's crds/ first,
// then its templates in the order `helm install` creates them. Values the chart refuses
// (its kubeVersion, its schema, a fail in a template) are an error.
//
// It takes the steps of `helm template` (pkg/action's client-only install) with the packages
// that do the work, which link far less than pkg/action (plugins, registries, storage).
func Render(chartDir string, opts Options) ([]*unstructured.Unstructured, error) {
	chart, err := loader.Load(chartDir)
	if err != nil {
		return nil, fmt.Errorf("helm template %s: %w", chartDir, err)
	}
	kubeVersion, err := parseKubeVersion(opts.KubeVersion)
	if err != nil {
		return nil, err
	}
	if c := chart.Metadata.KubeVersion; c != "" && !chartutil.IsCompatibleRange(c, kubeVersion.String()) {
		return nil, fmt.Errorf("helm template %s: chart requires kubeVersion: %s which is incompatible with Kubernetes %s", chartDir, c, kubeVersion.Version)
	}
	caps := common.DefaultCapabilities.Copy()
	caps.KubeVersion = *kubeVersion
	values := opts.Values
	if values == nil {
		values = map[string]any{}
	}
	if err := chartutil.ProcessDependencies(chart, values); err != nil {
		return nil, fmt.Errorf("helm template %s: %w", chartDir, err)
	}
	release := common.ReleaseOptions{Name: ReleaseName, Namespace: opts.Namespace, Revision: 1, IsInstall: true}
	renderValues, err := commonutil.ToRenderValuesWithSchemaValidation(chart, values, release, caps, false)
	if err != nil {
		return nil, fmt.Errorf("helm template %s: %w", chartDir, err)
	}
	files, err := engine.Render(chart, renderValues)
	if err != nil {
		return nil, fmt.Errorf("helm template %s: %w", chartDir, err)
	}
	for name := range files {
		if strings.HasSuffix(name, "NOTES.txt") { // printed after an install, not applied
			delete(files, name)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return nil, fmt.Errorf("helm template %s: %w", chartDir, err)
	}
	if len(hooks) > 0 {
		return nil, fmt.Errorf("helm template %s: %d hooks, which Render does not return", chartDir, len(hooks))
	}
	var objs []*unstructured.Unstructured
	if !opts.SkipCRDs {
		for _, crd := range chart.CRDObjects() {
			decoded, err := testenv.DecodeManifests(crd.Filename, crd.File.Data)
			if err != nil {
				return nil, err
			}
			objs = append(objs, decoded...)
		}
	}
	for _, m := range manifests {
		decoded, err := testenv.DecodeManifests(m.Name, []byte(m.Content))
		if err != nil {
			return nil, err
		}
		objs = append(objs, decoded...)
	}
	return objs, nil
}

// Lint runs `helm lint --strict` on the chart with values (nil: the chart's defaults) for
// namespace and kubeVersion (empty: KubeVersion). It returns every message helm prints, as
// "[SEVERITY] path: message", and an error when a warning or an error is among them.
func Lint(chartDir, namespace string, values map[string]any, kubeVersion string) ([]string, error) {
	v, err := parseKubeVersion(kubeVersion)
	if err != nil {
		return nil, err
	}
	if values == nil {
		values = map[string]any{}
	}
	linter := lint.RunAll(chartDir, values, namespace, lint.WithKubeVersion(v))
	var messages []string
	var failures []error
	for _, m := range linter.Messages {
		messages = append(messages, m.Error())
		if m.Severity >= support.WarningSev {
			failures = append(failures, m)
		}
	}
	if len(failures) > 0 {
		return messages, fmt.Errorf("helm lint --strict %s: %w", chartDir, errors.Join(failures...))
	}
	return messages, nil
}

func parseKubeVersion(version string) (*common.KubeVersion, error) {
	if version == "" {
		version = KubeVersion
	}
	v, err := common.ParseKubeVersion(version)
	if err != nil {
		return nil, fmt.Errorf("kube version %q: %w", version, err)
	}
	return v, nil
}
