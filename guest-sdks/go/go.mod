module tally.dev/tally

go 1.24
