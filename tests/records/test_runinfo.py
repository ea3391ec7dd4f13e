def test_git_commit_says_modified_when_the_tree_differs_from_head(tmp_path, monkeypatch):
    import subprocess

    from harness.records import runinfo

    def git(*args):
        subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=tmp_path, check=True,
                       capture_output=True)

    git("init", "-q")
    (tmp_path / "f.txt").write_text("a")
    git("add", "f.txt")
    git("commit", "-q", "-m", "x")
    monkeypatch.setattr(runinfo, "REPO_ROOT", tmp_path)
    clean = runinfo.git_commit()
    assert clean and len(clean) == 40
    (tmp_path / "f.txt").write_text("b")  # e.g. a GPU machine's copy: newer files over a stale .git
    assert runinfo.git_commit() == clean + "+modified"
