package entry

import (
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// TestTheConstantsAreTheKernels: the numbers written here, to keep
// golang.org/x/sys out of the re-exec's start, are the ones x/sys has.
func TestTheConstantsAreTheKernels(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"SYS_LANDLOCK_RESTRICT_SELF", sysLandlockRestrictSelf, unix.SYS_LANDLOCK_RESTRICT_SELF},
		{"SYS_IO_URING_SETUP", sysIOUringSetup, unix.SYS_IO_URING_SETUP},
		{"PR_SET_SECCOMP", prSetSeccomp, unix.PR_SET_SECCOMP},
		{"PR_CAPBSET_DROP", prCapbsetDrop, unix.PR_CAPBSET_DROP},
		{"PR_SET_NO_NEW_PRIVS", prSetNoNewPrivs, unix.PR_SET_NO_NEW_PRIVS},
		{"PR_CAP_AMBIENT", prCapAmbient, unix.PR_CAP_AMBIENT},
		{"PR_CAP_AMBIENT_CLEAR_ALL", prCapAmbientClearAll, unix.PR_CAP_AMBIENT_CLEAR_ALL},
		{"CAP_SETPCAP", capSetpcap, unix.CAP_SETPCAP},
		{"LINUX_CAPABILITY_VERSION_3", capabilityV3, unix.LINUX_CAPABILITY_VERSION_3},
		{"SECCOMP_MODE_FILTER", seccompModeFilter, unix.SECCOMP_MODE_FILTER},
		{"SECCOMP_RET_ERRNO", seccompRetErrno, unix.SECCOMP_RET_ERRNO},
		{"SECCOMP_RET_ALLOW", seccompRetAllow, unix.SECCOMP_RET_ALLOW},
		{"AUDIT_ARCH_X86_64", uint64(auditArch["amd64"]), unix.AUDIT_ARCH_X86_64},
		{"AUDIT_ARCH_AARCH64", uint64(auditArch["arm64"]), unix.AUDIT_ARCH_AARCH64},
	} {
		if c.got != c.want {
			t.Errorf("%s is %#x here, %#x in golang.org/x/sys/unix", c.name, c.got, c.want)
		}
	}
}

func TestParseTakesTheRulesetTheNetworkAndTheCommand(t *testing.T) {
	s, err := parse([]string{"--ruleset-fd", "3", "--ruleset-flags", "2", "--network-off", "--", "/bin/sh", "-c", "--network-off"})
	if err != nil || s.rulesetFD != 3 || s.rulesetFlags != 2 || !s.networkOff || !slices.Equal(s.argv, []string{"/bin/sh", "-c", "--network-off"}) {
		t.Fatalf("parse = %+v, %v", s, err)
	}
	if s, err := parse([]string{"--ruleset-fd", "3", "--ruleset-flags", "0", "--spare", "4"}); err != nil || s.spareFD != 4 || s.argv != nil {
		t.Fatalf("parse of a spare = %+v, %v", s, err)
	}
	for _, bad := range [][]string{
		{"--", "/bin/true"},                      // no ruleset
		{"--ruleset-fd", "3"},                    // no command
		{"--ruleset-fd", "x", "--", "/bin/true"}, // not a number
		{"--ruleset-fd", "3", "--bogus", "--", "/bin/true"},
	} {
		if _, err := parse(bad); err == nil {
			t.Errorf("parse(%q) succeeded", bad)
		}
	}
}

func TestParseTakesALauncherAndItsCommands(t *testing.T) {
	if s, err := parse([]string{"--ruleset-fd", "3", "--ruleset-flags", "0", "--launch", "4"}); err != nil || s.launchFD != 4 || s.argv != nil || s.spareFD >= 0 {
		t.Fatalf("parse of a launcher = %+v, %v", s, err)
	}
	if _, err := parse([]string{"--ruleset-fd", "3", "--launch", "4", "--spare", "5"}); err == nil {
		t.Error("parse took a launcher that is a spare too")
	}
	got, err := parseLaunches([]string{"5", "6", "7", "/w", "2", "/bin/sh", "-c", "1", "A=1", "8", "9", "10", "/x", "1", "/bin/true", "0"})
	want := []launch{
		{files: [3]int{5, 6, 7}, dir: "/w", argv: []string{"/bin/sh", "-c"}, env: []string{"A=1"}},
		{files: [3]int{8, 9, 10}, dir: "/x", argv: []string{"/bin/true"}, env: []string{}},
	}
	if err != nil || len(got) != 2 {
		t.Fatalf("parseLaunches = %+v, %v", got, err)
	}
	for i := range want {
		if got[i].files != want[i].files || got[i].dir != want[i].dir || !slices.Equal(got[i].argv, want[i].argv) || !slices.Equal(got[i].env, want[i].env) {
			t.Errorf("command %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	for _, bad := range [][]string{
		nil,        // no command
		{"5", "6"}, // no stderr
		{"1", "6", "7", "/w", "1", "/bin/true", "0"}, // the launcher's own stdout
		{"5", "6", "7", "/w", "0", "0"},              // no program
		{"5", "6", "7", "/w", "3", "/bin/true"},      // more arguments than there are
		{"5", "6", "7", "/w", "1", "/bin/true"},      // no environment count
		{"5", "6", "7", "/w", "1", "/bin/true", "2", "A=1"},
	} {
		if _, err := parseLaunches(bad); err == nil {
			t.Errorf("parseLaunches(%q) succeeded", bad)
		}
	}
}
