package doubling

// Schedule is the partner schedule of recursive doubling over p ranks as
// rank r takes part in it, for the shared allreduce and for backends that
// run their own (folding on receive, say) over the same pairing. With p
// not a power of two, the first 2(p-pof2) ranks pair up first (MPICH's
// scheme): the even one hands its vector to the odd one (HandsTo) and
// takes the result back at the end; the odd one folds it in first and
// returns the result to it at the end (FoldsFrom). The others exchange
// with Partner(0), …, Partner(Steps()-1) in turn.
type Schedule struct {
	r, rem, pof2, newRank int
}

// New returns rank r's schedule over p ranks (0 <= r < p).
func New(p, r int) Schedule {
	pof2 := 1
	for pof2*2 <= p {
		pof2 *= 2
	}
	d := Schedule{r: r, rem: p - pof2, pof2: pof2, newRank: r - (p - pof2)}
	if r < 2*d.rem {
		d.newRank = -1
		if r%2 == 1 {
			d.newRank = r / 2
		}
	}
	return d
}

// HandsTo returns the rank this one hands its vector to, and later takes
// the result from, sitting the exchanges out; -1 when it takes part.
func (d Schedule) HandsTo() int {
	if d.newRank < 0 {
		return d.r + 1
	}
	return -1
}

// FoldsFrom returns the rank whose vector this one folds in before the
// exchanges, and to which it sends the result after them; -1 for none.
func (d Schedule) FoldsFrom() int {
	if d.r < 2*d.rem && d.newRank >= 0 {
		return d.r - 1
	}
	return -1
}

// Steps returns how many exchanges this rank makes: log2(pof2), or 0 when
// it hands its vector over.
func (d Schedule) Steps() int {
	if d.newRank < 0 {
		return 0
	}
	n := 0
	for m := 1; m < d.pof2; m <<= 1 {
		n++
	}
	return n
}

// Partner returns the rank this one exchanges with in step i.
func (d Schedule) Partner(i int) int {
	peer := d.newRank ^ (1 << i)
	if peer < d.rem {
		return peer*2 + 1
	}
	return peer + d.rem
}
