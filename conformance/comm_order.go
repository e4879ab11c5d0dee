package conformance

import (
	"context"
	"fmt"

	"github.com/xpu-go/xpu/comm"
)

// The matching-order cases: a message that matches several posted
// receives goes to the one posted first, whichever of them names its
// source (or tag) and whichever uses AnySource (or AnyTag). Rank 0 posts
// two receives that both match, then rank 1 sends two messages with one
// tag: the first message must fill the receive posted first. Each round
// runs with a small message and with one too large to go eagerly.

// orderRecv is one receive of a matching-order round.
type orderRecv struct{ source, tag int }

func (r orderRecv) String() string {
	src, tag := fmt.Sprint(r.source), fmt.Sprint(r.tag)
	if r.source == comm.AnySource {
		src = "AnySource"
	}
	if r.tag == comm.AnyTag {
		tag = "AnyTag"
	}
	return fmt.Sprintf("Irecv(%s, %s)", src, tag)
}

// orderTag is the tag rank 1 sends with in the matching-order cases.
const orderTag = 500

// orderRounds are the pairs of receives rank 0 posts, first then second.
func orderRounds(wildSource, wildTag bool) [][2]orderRecv {
	spec := orderRecv{1, orderTag}
	var wild []orderRecv
	if wildSource {
		wild = append(wild, orderRecv{comm.AnySource, orderTag})
	}
	if wildTag {
		wild = append(wild, orderRecv{1, comm.AnyTag})
	}
	wild = append(wild, orderRecv{comm.AnySource, comm.AnyTag})
	var rounds [][2]orderRecv
	for _, w := range wild {
		rounds = append(rounds, [2]orderRecv{spec, w}, [2]orderRecv{w, spec})
	}
	return rounds
}

// orderSizes are the sizes of the first message of a round: small, and
// larger than the eager limit of the repository's transports. The second
// message is one byte longer.
var orderSizes = []int{100, 200_000}

func commAnySourceOrder(ctx context.Context, me, n int, cm comm.Comm) error {
	return commPostedOrder(ctx, me, cm, orderRounds(true, false))
}

func commAnyTagOrder(ctx context.Context, me, n int, cm comm.Comm) error {
	return commPostedOrder(ctx, me, cm, orderRounds(false, true))
}

func commPostedOrder(ctx context.Context, me int, cm comm.Comm, rounds [][2]orderRecv) error {
	const sig = orderTag + 1
	k := 0
	for _, size := range orderSizes {
		for _, round := range rounds {
			k++
			first, second := pattern(2*k, size), pattern(2*k+1, size+1)
			if me == 1 {
				if err := await(ctx, cm, 0, sig); err != nil {
					return err
				}
				if err := comm.Send(ctx, cm, blk(first), 0, orderTag); err != nil {
					return fmt.Errorf("the first message of round %d: %w", k, err)
				}
				if err := comm.Send(ctx, cm, blk(second), 0, orderTag); err != nil {
					return fmt.Errorf("the second message of round %d: %w", k, err)
				}
				continue
			}
			bufs := [2][]byte{make([]byte, size+1), make([]byte, size+1)}
			var reqs [2]comm.Request
			for i, rv := range round {
				r, err := cm.Irecv(blk(bufs[i]), rv.source, rv.tag)
				if err != nil {
					return fmt.Errorf("%v: %w", rv, err)
				}
				reqs[i] = r
			}
			if err := signal(ctx, cm, 1, sig); err != nil {
				return err
			}
			var sts [2]comm.Status
			for i, r := range reqs {
				st, err := r.Wait(ctx)
				if err != nil {
					return fmt.Errorf("%v, posted %s: %w", round[i], [2]string{"first", "second"}[i], err)
				}
				sts[i] = st
			}
			if sts[0].Count == size+1 && sts[1].Count == size {
				return fmt.Errorf("%v was posted before %v, both match the two messages of %d and %d bytes rank 1 sent with tag %d, "+
					"but the second-posted receive took the first message: %v",
					round[0], round[1], size, size+1, orderTag, rulePostedOrder)
			}
			for i, want := range [][]byte{first, second} {
				what := fmt.Sprintf("%v, posted %s", round[i], [2]string{"first", "second"}[i])
				if err := checkStatus(what, sts[i], 1, orderTag, len(want)); err != nil {
					return err
				}
				if d := diff(want, bufs[i][:len(want)]); d != "" {
					return fmt.Errorf("%s: %s", what, d)
				}
			}
		}
	}
	return nil
}
