module github.com/cuzk/cuzk/clients/go

go 1.19
