module burst

go 1.19
