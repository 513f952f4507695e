module spawner

go 1.19
