module github.com/enterprise-ai/eai-sandbox/sdk/go

go 1.19
