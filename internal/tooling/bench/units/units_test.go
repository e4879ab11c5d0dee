package units

import (
	"math"
	"testing"
)

func TestDigits(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want string
	}{
		{0, "0"},
		{0.000266, "0.000266"},
		{0.0123456, "0.0123"},
		{0.5, "0.500"},
		{1, "1.00"},
		{1.23456, "1.23"},
		{12.3456, "12.3"},
		{99.96, "100"}, // rounded before the decimals are chosen
		{122.85, "123"},
		{1234.5, "1230"},
		{12346, "12300"},
		{-1.5, "-1.50"},
		{math.Inf(1), "+Inf"},
	} {
		if got := Digits(c.v); got != c.want {
			t.Errorf("Digits(%v) = %q, want %q", c.v, got, c.want)
		}
	}
}

func TestTimeAndRate(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{Time(0.685), "0.685 ns"},
		{Time(126), "126 ns"},
		{Time(999.4), "999 ns"},
		{Time(999.96), "1.00 µs"},
		{Time(7264), "7.26 µs"},
		{Time(122850), "123 µs"},
		{Time(2.5e6), "2.50 ms"},
		{Time(3e9), "3.00 s"},
		{Time(4e12), "4000 s"},
		{Rate(56.2), "56.2 GB/s"},
		{Rate(1), "1.00 GB/s"},
		{Rate(0.112), "112 MB/s"},
		{Rate(0.000266), "266 kB/s"},
		{Rate(2e-10), "0.200 B/s"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestScale(t *testing.T) {
	if s := TimeScale(30e3); s.Name != "µs" || s.Format(7689) != "7.69" || s.Format(10.2e6) != "10200" {
		t.Errorf("TimeScale(30 µs) = %+v: 7689 ns reads %q, 10.2 ms %q", s, s.Format(7689), s.Format(10.2e6))
	}
	if s := RateScale(0.05); s.Name != "MB/s" || s.Format(0.000266) != "0.266" {
		t.Errorf("RateScale(0.05) = %+v", s)
	}
}
