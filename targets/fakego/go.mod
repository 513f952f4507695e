module fakego

go 1.19
