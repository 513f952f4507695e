module stacks

go 1.19
