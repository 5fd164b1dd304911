package main

import "testing"

func TestControlCommandsWithBadArgumentsAreAnsweredWithWhatWasWrong(t *testing.T) {
	for command, want := range map[string]string{
		"":                     "unknown command ",
		"reboot":               "unknown command reboot",
		"status now":           "unknown command status now",
		"writeback-older soon": "writeback-older takes milliseconds, not soon",
		"fail-fsync disk":      "fail-fsync takes dir or file and a count, not disk",
		"fail-fsync dir x":     "fail-fsync takes a decimal count, not x",
		"cut sideways":         "cut takes drop, tear or subset, not sideways",
		"cut tear 1 2":         "cut takes a model and a seed, not tear 1 2",
	} {
		answer, err := answerControl(nil, command)
		if err == nil || err.Error() != want {
			t.Errorf("%q: answer %v, error %v; want the error %q", command, answer, err, want)
		}
	}
}
