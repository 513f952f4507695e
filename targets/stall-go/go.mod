module stall

go 1.19
