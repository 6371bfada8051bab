def test_health(client):
    assert client.get("/health").json() == {"status": "ok"}


def test_create_then_rolled_back(client):
    r = client.post("/v1/benchmarks", json={"name": "smoke"})
    assert r.status_code == 201, r.text
    r = client.post("/v1/benchmarks/smoke/scores", content=b"model,a,b\nm1,0,1\nm2,1,\n", headers={"content-type": "text/csv"})
    assert r.status_code == 200, r.text
    assert client.get("/v1/benchmarks/smoke/scores").text == "model,a,b\nm1,0,1\nm2,1,\n"


def test_previous_test_rolled_back(client):
    assert client.get("/v1/benchmarks/smoke").status_code == 404
