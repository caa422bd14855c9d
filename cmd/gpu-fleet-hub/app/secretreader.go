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

package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientauthenticationv1 "k8s.io/client-go/pkg/apis/clientauthentication/v1"
	"sigs.k8s.io/cluster-inventory-api/pkg/credentialplugin"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/daemon"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeclient"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/member"
)

// secretTokenKey is the key of a secretreader Secret that holds the member's token.
const secretTokenKey = "token"

// newSecretReaderCommand is `gpu-fleet-hub secretreader`: cluster-inventory-api's
// secretreader credential plugin (plugins/secretreader), carried in the hub's binary. The hub
// runs it for a ClusterProfile whose access provider is "secretreader": it reads the
// ExecCredential in $KUBERNETES_EXEC_INFO (provideClusterInfo), gets the Secret
// <namespace>/<clusterName> of the hub (clusterName from the cluster's exec extension) and
// prints an ExecCredential with its key "token".
func newSecretReaderCommand() *cobra.Command {
	var kubeconfig, namespace string
	cmd := &cobra.Command{
		Use:   member.SecretReaderProvider,
		Short: "The secretreader credential plugin: the token of a member from a Secret on the hub",
		Long: `Run by the hub as the exec credential plugin of the access provider "secretreader"
(--clusterprofile-provider-file, with provideClusterInfo): prints, as an ExecCredential, the key
"token" of the hub's Secret <namespace>/<clusterName>, clusterName being the one the
ClusterProfile's cluster extension client.authentication.k8s.io/exec names. The protocol and the
Secret are those of cluster-inventory-api's plugins/secretreader.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			config, ns, err := daemon.LoadConfig(kubeconfig, namespace)
			if err != nil {
				return err
			}
			config.UserAgent = name + " secretreader"
			core, err := kubeclient.New(config, corev1.SchemeGroupVersion, nil)
			if err != nil {
				return err
			}
			// Run reads $KUBERNETES_EXEC_INFO, writes the ExecCredential and exits 1 on a failure.
			credentialplugin.Run(secretReader{namespace: ns, secret: func(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
				return kubeclient.Secrets(core, namespace).Get(ctx, name, metav1.GetOptions{})
			}})
			return nil
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "Path to a kubeconfig of the hub. Without it: the in-cluster config, else $KUBECONFIG or ~/.kube/config.")
	cmd.Flags().StringVar(&namespace, "namespace", "", "Namespace of the token Secrets. Default: $POD_NAMESPACE, else the kubeconfig context's namespace, else \"default\".")
	return cmd
}

// secretReader is the secretreader provider: the token of the Secret the cluster names.
type secretReader struct {
	namespace string
	secret    func(ctx context.Context, namespace, name string) (*corev1.Secret, error)
}

func (secretReader) Name() string { return member.SecretReaderProvider }

// GetToken returns the token of the Secret <namespace>/<clusterName>.
func (r secretReader) GetToken(ctx context.Context, in clientauthenticationv1.ExecCredential) (clientauthenticationv1.ExecCredentialStatus, error) {
	if in.Spec.Cluster == nil || len(in.Spec.Cluster.Config.Raw) == 0 {
		return clientauthenticationv1.ExecCredentialStatus{}, errors.New("missing ExecCredential.Spec.Cluster.Config: the ClusterProfile's cluster needs the extension client.authentication.k8s.io/exec with a clusterName")
	}
	var cfg struct {
		ClusterName string `json:"clusterName"`
	}
	if err := json.Unmarshal(in.Spec.Cluster.Config.Raw, &cfg); err != nil {
		return clientauthenticationv1.ExecCredentialStatus{}, fmt.Errorf("invalid ExecCredential.Spec.Cluster.Config: %w", err)
	}
	if cfg.ClusterName == "" {
		return clientauthenticationv1.ExecCredentialStatus{}, errors.New("missing clusterName in ExecCredential.Spec.Cluster.Config")
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sec, err := r.secret(ctx, r.namespace, cfg.ClusterName)
	if err != nil {
		return clientauthenticationv1.ExecCredentialStatus{}, fmt.Errorf("get secret %s/%s: %w", r.namespace, cfg.ClusterName, err)
	}
	token := sec.Data[secretTokenKey]
	if len(token) == 0 {
		return clientauthenticationv1.ExecCredentialStatus{}, fmt.Errorf("secret %s/%s has no key %q", r.namespace, cfg.ClusterName, secretTokenKey)
	}
	return clientauthenticationv1.ExecCredentialStatus{Token: string(token)}, nil
}
