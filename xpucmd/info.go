package xpucmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/xpu-go/xpu"
	"github.com/xpu-go/xpu/transfer"
)

func runInfo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := NewFlagSet("info", stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := ParseFlags(fs, args); err != nil {
		return err
	}
	infos := xpu.DescribeAll(ctx)
	plan, planErr := xpu.PlanDefault()
	if *asJSON {
		why := plan.Why
		if planErr != nil {
			why = planErr.Error()
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Backends []xpu.Info `json:"backends"`
			Chain    []string   `json:"chain"`
			ChainWhy string     `json:"chain_why"`
			Paths    []string   `json:"transfer_paths"`
		}{infos, xpu.Chain(), why, transfer.Paths()})
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BACKEND\tAVAILABLE\tCONCEPTS\tCAPABILITIES")
	for _, in := range infos {
		avail := "yes"
		if !in.Available {
			avail = "no"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", in.Name, avail, strings.Join(in.Concepts, ","), strings.Join(in.Capabilities, ","))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, in := range infos {
		fmt.Fprintf(stdout, "\n%s:\n", in.Name)
		if len(in.Aliases) > 0 {
			fmt.Fprintf(stdout, "  also named: %s\n", strings.Join(in.Aliases, ", "))
		}
		if !in.Available {
			fmt.Fprintf(stdout, "  unavailable: %s\n", in.Reason)
		}
		if in.Library != "" {
			fmt.Fprintf(stdout, "  library: %s\n", in.Library)
		}
		linked := false
		for _, d := range in.Devices {
			fmt.Fprintf(stdout, "  device %d: %s\n", d.Index, d.Summary())
			if more := d.Details(); more != "" {
				fmt.Fprintf(stdout, "    %s\n", more)
			}
			for _, p := range d.Ports {
				fmt.Fprintf(stdout, "    %s\n", p)
			}
			linked = linked || len(d.Links) > 0
		}
		if linked {
			fmt.Fprintln(stdout, "  topology:")
			writeIndented(stdout, "    ", xpu.TopologyMatrix(in.Devices))
		}
		if len(in.ElementTypes) > 0 {
			fmt.Fprintf(stdout, "  element types: %s\n", strings.Join(in.ElementTypes, ", "))
		}
	}
	writeSelection(ctx, stdout, plan, planErr)
	if p := transfer.Paths(); len(p) > 0 {
		fmt.Fprintf(stdout, "transfer paths: %s (and host<->host between any host-accessible spaces)\n", strings.Join(p, ", "))
	} else {
		fmt.Fprintln(stdout, "transfer paths: host<->host between any host-accessible spaces")
	}
	return nil
}

// writeSelection writes the chain xpu.OpenDefault would try and why, and
// what becomes of each candidate by its Info: skipped with the reason, up
// to the first available one, which it would choose.
func writeSelection(ctx context.Context, w io.Writer, plan xpu.Selection, err error) {
	if err != nil {
		fmt.Fprintf(w, "\nselection chain of OpenDefault: none: %v\n", err)
		return
	}
	fmt.Fprintf(w, "\nselection chain of OpenDefault: %s (%s)\n", strings.Join(plan.Chain, " -> "), plan.Why)
	for _, n := range plan.Chain {
		in, err := xpu.Describe(ctx, n)
		switch {
		case err != nil:
			fmt.Fprintf(w, "  %s: skipped: %v\n", n, err)
		case !in.Available:
			fmt.Fprintf(w, "  %s: skipped: unavailable: %s\n", n, in.Reason)
		default:
			fmt.Fprintf(w, "  %s: chosen, the first available\n", n)
			return
		}
	}
}

// writeIndented writes text to w with each of its non-empty lines
// prefixed by indent.
func writeIndented(w io.Writer, indent, text string) {
	for line := range strings.Lines(text) {
		if strings.TrimSpace(line) != "" {
			line = indent + line
		}
		io.WriteString(w, line)
	}
}
