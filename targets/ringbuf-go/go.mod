module ringbuf

go 1.19
