//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package main

// takeTerminal does nothing where process groups and terminals are not Unix's.
func takeTerminal() (giveBack func()) { return func() {} }
