// Command xpu reports the backends this build knows, runs the conformance
// suites against them, launches jobs, and benchmarks the backends against
// their baselines: package xpucmd, with this repository's backends
// (backends.go) and the bench command (bench.go).
//
//	xpu info [--json]
//	xpu conformance [--backend NAME] [--run REGEXP] [-o KEY=VALUE] [-v]
//	xpu run -n N [--] prog [args...]
//	xpu bench [--json] [--filter REGEXP] [--count N] [--short] [--ref DIR]
//	xpu bench sweep [--filter REGEX] [--min-size SIZE] [--max-size SIZE] [--json] [-o FILE] [--plot DIR] [--budget DURATION]
//	xpu bench compare [-v] old.json new.json
//	xpu bench plot [-o DIR] run.json
//	xpu bench rounds [--filter REGEXP] DIR
//
// xpu bench -h lists the subcommands of bench, one line each; every
// command's -h lists its flags.
//
// Exit status: 0 on success, 1 when a conformance case fails or a command
// fails, 2 for bad usage.
package main

import "github.com/xpu-go/xpu/xpucmd"

func main() { xpucmd.Main(benchCommand) }
