module httpd

go 1.19
