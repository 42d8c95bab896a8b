"""Roles as data (roles/<name>/{defaults,tasks}.yaml, templates/) and their operations."""

from gpunode.roles.loader import Role, RoleError, Task, builtin_roles_dir, find_role, search_path

__all__ = ["Role", "RoleError", "Task", "builtin_roles_dir", "find_role", "search_path"]
