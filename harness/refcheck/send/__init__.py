"""refcheck's fourth floor: the senders, which drive a live server through a prompt set and judge as outputs arrive."""
