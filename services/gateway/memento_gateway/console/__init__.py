"""The web console at /console (issue 32): server-rendered pages over memory-api's console routes, for the people who
own the memories. Sign-in with an access key or through this gateway's own OAuth server; sessions in Redis."""
