module github.com/keygate/keygate

go 1.26.8
