module webhook

go 1.24

require tally.dev/tally v0.1.0
