module latency-go

go 1.19
