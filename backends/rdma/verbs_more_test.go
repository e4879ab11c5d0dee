//go:build rdma

package rdma_test

import "testing"

func TestVerbsOneSided(t *testing.T)         { testOneSided(t, verbsKit(t)) }
func TestVerbsOneSidedPeerLost(t *testing.T) { testOneSidedPeerLost(t, verbsKit(t)) }
func TestVerbsRegistrationCache(t *testing.T) {
	testRegistrationCache(t, verbsKit(t))
}
func TestVerbsFrozenPeer(t *testing.T)      { testFrozenPeer(t, verbsKit(t)) }
func TestVerbsAllreduceStress(t *testing.T) { testAllreduceStress(t, verbsKit(t), 200) }
func TestVerbsNotify(t *testing.T)          { testNotify(t, verbsKit(t)) }
func TestVerbsNotifyPeerLost(t *testing.T)  { testNotifyPeerLost(t, verbsKit(t)) }
func TestVerbsBatchNative(t *testing.T)     { testBatchNative(t, verbsKit(t)) }
