package ctl

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/trellis-dev/trellis/ctl/hubconn"
)

// caRotationPath is the hub's CA rotation endpoint (hub.CARotationPath; trellisctl does not import the hub).
const caRotationPath = "/hub/ca-rotation"

// caRotationStatus is the hub's answer (pki.Status).
type caRotationStatus struct {
	Phase          string    `json:"phase"`
	LastInitiation time.Time `json:"lastInitiationTime"`
	LastCompletion time.Time `json:"lastCompletionTime"`
	CurrentSerial  string    `json:"currentSerial"`
	NextSerial     string    `json:"nextSerial"`
}

func (a *app) caRotationCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ca-rotation (status | start | prepared | complete)",
		Short: "Show or move the rotation of the hub's CA (Preparing → Prepared → Completing → Completed)",
		Long: `ca-rotation rotates the hub's CA in Gardener's two phases, for cluster admins. start creates a new CA: it joins
the trust bundle (data-dir/pki/ca.crt and the bundle every certificate answer on the agent link carries) and signs
every certificate from then on (phase Preparing). Once every agent runs with a certificate of the new CA (annotate
the seeds gardener.cloud/operation=renew-kubeconfig), prepared records it (Prepared); complete drops the old CA
(Completing, then Completed), after which certificates of the old CA are refused. The admin token rotates in the
same phases: start writes a new one to the hub's data-dir/admin-token.next, valid beside the old one; complete
moves it to data-dir/admin-token and refuses the old one. status prints the phase.`,
		Example:   "  trellisctl ca-rotation start\n  trellisctl ca-rotation status",
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"status", "start", "prepared", "complete"},
		RunE: func(cmd *cobra.Command, args []string) error {
			method, path := http.MethodPost, caRotationPath+"/"+args[0]
			switch args[0] {
			case "status":
				method, path = http.MethodGet, caRotationPath
			case "start", "prepared", "complete":
			default:
				return fmt.Errorf("ca-rotation: unknown action %q (status, start, prepared or complete)", args[0])
			}
			t, _, err := a.connect()
			if err != nil {
				return err
			}
			client, err := hubconn.HTTP(t)
			if err != nil {
				return err
			}
			ctx, cancel := a.call(cmd.Context())
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(t.Hub, "/")+path, nil)
			if err != nil {
				return err
			}
			if t.Token != "" {
				req.Header.Set("Authorization", "Bearer "+t.Token)
			}
			resp, err := client.Do(req)
			if err != nil {
				return &hubconn.UnreachableError{Message: err.Error()}
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			if err != nil {
				return err
			}
			if resp.StatusCode != http.StatusOK {
				var st struct {
					Message string `json:"message"`
				}
				if json.Unmarshal(body, &st) != nil || st.Message == "" {
					st.Message = strings.TrimSpace(string(body))
				}
				return fmt.Errorf("ca-rotation %s: %s (%s)", args[0], st.Message, resp.Status)
			}
			var s caRotationStatus
			if err := json.Unmarshal(body, &s); err != nil {
				return fmt.Errorf("ca-rotation: the hub's answer: %w", err)
			}
			printCARotation(cmd.OutOrStdout(), s)
			return nil
		},
	}
	return cmd
}

func printCARotation(w io.Writer, s caRotationStatus) {
	phase := s.Phase
	if phase == "" {
		phase = "(never rotated)"
	}
	fmt.Fprintf(w, "Phase:           %s\n", phase)
	fmt.Fprintf(w, "Current CA:      %s\n", s.CurrentSerial)
	if s.NextSerial != "" {
		fmt.Fprintf(w, "New CA:          %s\n", s.NextSerial)
	}
	if !s.LastInitiation.IsZero() {
		fmt.Fprintf(w, "Last initiation: %s\n", s.LastInitiation.Format(time.RFC3339))
	}
	if !s.LastCompletion.IsZero() {
		fmt.Fprintf(w, "Last completion: %s\n", s.LastCompletion.Format(time.RFC3339))
	}
}
